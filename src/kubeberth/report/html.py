"""A small, self-contained HTML report: a title, sections, and blocks inside them.

Reports are read offline, mailed around and attached to tickets, so the page is one file with
no network access and no JavaScript: styles are inline, figures are SVG documents embedded as
``data:`` URIs (each keeps its own id namespace, so several matplotlib figures never clash).
The page is a pure function of its blocks: nothing here reads a clock or a path, so the same
blocks always render to the same bytes.

The API is deliberately tiny so features add sections without touching this module::

    report = Report("kubeberth simulate: openb")
    report.section("Allocation", Paragraph("..."), Table(["metric", "value"], rows), figure)
    path.write_text(report.render())

A block is anything with an ``html()`` method returning escaped markup (see :class:`Block`).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

STYLE = """\
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0 auto;\
max-width:1100px;padding:1em 2em;color:#1b1f24;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;border-bottom:1px solid #d0d7de;\
padding-bottom:.2em;margin-top:2em}
nav ol{columns:2;font-size:.95em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #d0d7de;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
caption{caption-side:top;text-align:left;font-weight:600;padding:.2em 0}
figure{margin:.8em 0}figure img{max-width:100%;height:auto}
figcaption{font-size:.9em;color:#57606a}
details{margin:.6em 0}summary{cursor:pointer}
.subtitle{color:#57606a;margin-top:0}
"""


class Block(Protocol):
    """One piece of a section: returns its own markup, with every user string escaped."""

    def html(self) -> str: ...


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


@dataclass(frozen=True, slots=True)
class Paragraph:
    text: str

    def html(self) -> str:
        return f"<p>{esc(self.text)}</p>"


Cell = str | int | float | None


def _cell(value: Cell) -> str:
    if value is None:
        return "<td></td>"
    if isinstance(value, bool):
        return f"<td>{esc(value)}</td>"
    if isinstance(value, int):
        return f'<td class="num">{value}</td>'
    if isinstance(value, float):
        return f'<td class="num">{value:.3f}</td>'
    return f"<td>{esc(value)}</td>"


@dataclass(frozen=True, slots=True)
class Table:
    """Rows of cells; ints and floats are right-aligned, floats shown with three decimals
    (format them yourself as strings for anything else)."""

    header: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    caption: str = ""

    def html(self) -> str:
        out = ["<table>"]
        if self.caption:
            out.append(f"<caption>{esc(self.caption)}</caption>")
        out.append("<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in self.header)
                   + "</tr></thead><tbody>")
        for row in self.rows:
            out.append("<tr>" + "".join(_cell(c) for c in row) + "</tr>")
        out.append("</tbody></table>")
        return "".join(out)


@dataclass(frozen=True, slots=True)
class Figure:
    """An SVG document (as produced by :func:`kubeberth.report.figures.svg_figure`)."""

    svg: str
    alt: str
    caption: str = ""

    def html(self) -> str:
        data = base64.b64encode(self.svg.encode()).decode("ascii")
        cap = f"<figcaption>{esc(self.caption)}</figcaption>" if self.caption else ""
        return (f'<figure><img alt="{esc(self.alt)}" '
                f'src="data:image/svg+xml;base64,{data}">{cap}</figure>')


@dataclass(frozen=True, slots=True)
class Details:
    """Blocks folded away behind a one-line summary (long lists)."""

    summary: str
    blocks: tuple[Block, ...]

    def html(self) -> str:
        inner = "".join(b.html() for b in self.blocks)
        return f"<details><summary>{esc(self.summary)}</summary>{inner}</details>"


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"


@dataclass(slots=True)
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> Section:
        self.blocks.extend(blocks)
        return self


class Report:
    """A titled page of sections, rendered in the order they were added."""

    def __init__(self, title: str, subtitle: str = "") -> None:
        self.title = title
        self.subtitle = subtitle
        self.sections: list[Section] = []

    def section(self, title: str, *blocks: Block) -> Report:
        self.sections.append(Section(title, list(blocks)))
        return self

    def extend(self, sections: Iterable[Section]) -> Report:
        self.sections.extend(sections)
        return self

    def render(self) -> str:
        anchors: list[str] = []
        for s in self.sections:
            base = anchor = slug(s.title)
            n = 1
            while anchor in anchors:
                n += 1
                anchor = f"{base}-{n}"
            anchors.append(anchor)
        out = ['<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
               '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
               f"<title>{esc(self.title)}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n"
               f"<h1>{esc(self.title)}</h1>\n"]
        if self.subtitle:
            out.append(f'<p class="subtitle">{esc(self.subtitle)}</p>\n')
        if self.sections:
            out.append("<nav><ol>" + "".join(
                f'<li><a href="#{a}">{esc(s.title)}</a></li>'
                for s, a in zip(self.sections, anchors, strict=True)) + "</ol></nav>\n")
        for s, a in zip(self.sections, anchors, strict=True):
            out.append(f'<section id="{a}">\n<h2>{esc(s.title)}</h2>\n')
            out.extend(b.html() + "\n" for b in s.blocks)
            out.append("</section>\n")
        out.append("</body>\n</html>\n")
        return "".join(out)
