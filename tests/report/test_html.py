"""The HTML building blocks: escaping, tables, figures, anchors, and page structure."""

from __future__ import annotations

import base64
import re

from kubeberth.report.html import Details, Figure, Paragraph, Report, Section, Table, slug


def test_paragraph_escapes_markup() -> None:
    assert Paragraph("a < b & <script>").html() == "<p>a &lt; b &amp; &lt;script&gt;</p>"


def test_table_cells_by_type() -> None:
    html = Table(("name", "n", "x", "none", "flag"),
                 [("<pod>", 3, 1.23456, None, True)], caption="c&d").html()
    assert "<caption>c&amp;d</caption>" in html
    assert "<th>name</th><th>n</th>" in html
    assert "<td>&lt;pod&gt;</td>" in html
    assert '<td class="num">3</td>' in html
    assert '<td class="num">1.235</td>' in html
    assert "<td></td>" in html
    assert "<td>True</td>" in html  # booleans are not numbers


def test_table_without_rows() -> None:
    assert Table(("a",), []).html() == \
        "<table><thead><tr><th>a</th></tr></thead><tbody></tbody></table>"


def test_figure_embeds_svg_as_data_uri() -> None:
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><text>"hi"</text></svg>'
    html = Figure(svg, alt='a "quoted" alt', caption="cap").html()
    data = re.search(r'base64,([^"]+)"', html)
    assert data is not None
    assert base64.b64decode(data.group(1)).decode() == svg
    assert 'alt="a &quot;quoted&quot; alt"' in html
    assert "<figcaption>cap</figcaption>" in html
    assert "figcaption" not in Figure(svg, "x").html()


def test_details_folds_blocks() -> None:
    html = Details("all <pods>", (Paragraph("one"), Paragraph("two"))).html()
    assert html == "<details><summary>all &lt;pods&gt;</summary><p>one</p><p>two</p></details>"


def test_slug() -> None:
    assert slug("Pod wait (creation to bind)") == "pod-wait-creation-to-bind"
    assert slug("CPU, memory & GPU") == "cpu-memory-gpu"
    assert slug("!!!") == "section"


def test_report_sections_in_order_with_unique_anchors() -> None:
    report = Report("T <1>", "sub").section("Queues", Paragraph("a")).section(
        "Queues", Paragraph("b"))
    report.extend([Section("Spill").add(Paragraph("c"), Paragraph("d"))])
    html = report.render()
    assert "<title>T &lt;1&gt;</title>" in html and "<h1>T &lt;1&gt;</h1>" in html
    assert '<p class="subtitle">sub</p>' in html
    assert re.findall(r'<section id="([^"]+)">', html) == ["queues", "queues-2", "spill"]
    assert re.findall(r'href="#([^"]+)"', html) == ["queues", "queues-2", "spill"]
    assert html.index("<p>a</p>") < html.index("<p>b</p>") < html.index("<p>c</p>") \
        < html.index("<p>d</p>")


def test_empty_report_is_a_valid_page_without_navigation() -> None:
    html = Report("empty").render()
    assert html.startswith("<!DOCTYPE html>") and html.endswith("</html>\n")
    assert "<nav>" not in html and "class=\"subtitle\"" not in html


def test_any_object_with_html_is_a_block() -> None:
    class Raw:
        def html(self) -> str:
            return "<hr>"

    assert "<hr>" in Report("r").section("s", Raw()).render()


def test_render_is_pure() -> None:
    report = Report("r").section("s", Table(("a",), [(1.5,)]))
    assert report.render() == report.render()
