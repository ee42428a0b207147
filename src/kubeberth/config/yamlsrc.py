"""Reading YAML/JSON input files so that every later error can name file, line and field.

Kubernetes users read errors against the file they wrote, so each document keeps the way back
from a field path (``spec.containers[0].resources.requests.cpu``) to its 1-based line. Documents
are loaded with PyYAML's C loader (composed to nodes, then constructed), and the node trees are
dropped straight away: large manifests would otherwise hold every scalar twice. Only when a line
is wanted, which happens on the error path, is the file composed again and the path walked.
This module does not know any Kubernetes kind; it only splits files into documents (including
``kind: List`` items), decodes duplicate keys, nulls and timestamps as Kubernetes does, and
turns ``msgspec`` validation errors into located :class:`InputError`.

Inputs are bounded before anything walks them: a source is at most :data:`MAX_SOURCE_BYTES`,
nesting at most libyaml's 1000 levels (JSON is held to the same through the decoder's recursion
guard), and YAML aliases may not expand a document past :data:`MAX_ALIAS_EXPANSION` values. PyYAML
shares an aliased value instead of copying it, so a "billion laughs" document loads small; the
limit keeps every later walk (msgspec, JSON encoding, the API server's store) from expanding it.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml

from kubeberth.api.errors import InputError

STDIN = "-"
MAX_SOURCE_BYTES = 64 * 2**20
MAX_NESTING = 1000  # libyaml's own limit (yaml_maximum_level_nesting)
MAX_ALIAS_EXPANSION = 1_000_000
_EXPECT_SIZE = f"a YAML or JSON input of at most {MAX_SOURCE_BYTES // 2**20} MiB"
_EXPECT_NESTING = f"data nested at most {MAX_NESTING} levels deep"
_EXPECT_ALIASES = (f"YAML whose aliases (*name) expand it to at most {MAX_ALIAS_EXPANSION:,} "
                   "values")
EXPECTED_YAML = (
    "YAML or JSON: 'key: value' pairs indented with spaces, list items starting with '- ', "
    "documents separated by '---'"
)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_T = TypeVar("_T")

# libyaml's wording for the mistakes people actually make, said in plain words.
_TOKEN_PROBLEM = "found character that cannot start any token"
_PLAIN_PROBLEMS = {
    _TOKEN_PROBLEM:
        "a character that cannot start a YAML token (a tab used for indentation, or an "
        "unquoted value starting with '@', '`' or '%')",
    "mapping values are not allowed in this context":
        "a 'key: value' pair where none is allowed (a value containing ': ' that needs "
        "quotes, or a key indented differently from its neighbours)",
    "did not find expected key":
        "a line indented differently from the keys around it",
    "did not find expected '-' indicator":
        "a list item indented differently from the items before it",
    "could not find expected ':'":
        "a line without ':' where a 'key: value' pair was expected",
    "found unexpected end of stream":
        "the file ends inside a quoted string",
    "did not find expected ',' or ']'": "a '[' list that is never closed with ']'",
    "did not find expected ',' or '}'": "a '{' mapping that is never closed with '}'",
    "exceeded maximum nesting depth": f"nesting deeper than {MAX_NESTING} levels",
}


class _DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping names the same key twice."""


class _Loader(yaml.CSafeLoader):
    """The C safe loader, decoding as Kubernetes' YAML reader (sigs.k8s.io/yaml) does.

    Duplicate keys are errors (strict decoding); ``key: null`` is dropped, since Kubernetes
    decodes null as "not set"; timestamps stay strings, as go-yaml keeps them when decoding
    into untyped values.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        has_merge = any(key.tag == _MERGE_TAG for key, _ in node.value)
        if has_merge:
            _check_duplicates(node)
        count = len(node.value)
        mapping = super().construct_mapping(node, deep)
        if not has_merge and len(mapping) != count:
            _check_duplicates(node)
        if None in mapping.values():
            return {k: v for k, v in mapping.items() if v is not None}
        return mapping


def _timestamp_as_string(loader: _Loader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_string)

# Integers longer than this stay text: no field holds one, Python refuses to convert past 4300
# digits, and as text a quantity reader still says "out of range" and a typed field "a string".
_MAX_INT_DIGITS = 30


def _int_or_text(loader: _Loader, node: yaml.ScalarNode) -> int | str:
    text = str(node.value)
    if len(text) > _MAX_INT_DIGITS:
        return text
    value: int = loader.construct_yaml_int(node)
    return value


def _json_int(text: str) -> int | str:
    return int(text) if len(text) <= _MAX_INT_DIGITS else text


_Loader.add_constructor("tag:yaml.org,2002:int", _int_or_text)


def _check_duplicates(node: yaml.MappingNode) -> None:
    seen: dict[str, yaml.Node] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        first = seen.get(key_node.value)
        if first is not None:
            raise _DuplicateKey(
                None, None,
                f"duplicate key {key_node.value!r} (first given on line "
                f"{first.start_mark.line + 1})",
                key_node.start_mark,
            )
        seen[key_node.value] = key_node


class Source:
    """One input's text; its YAML node trees are composed only when a line number is wanted."""

    def __init__(self, name: str, text: str, *, is_json: bool = False) -> None:
        self.name = name
        self.text = text
        self.is_json = is_json
        self._roots: list[yaml.Node] | None = None

    def root(self, index: int) -> yaml.Node | None:
        """The node tree of document ``index`` (None if the text cannot be composed as YAML)."""
        if self._roots is None:
            # JSON allows tabs as whitespace where YAML's block context does not; inside JSON
            # strings tabs must be escaped, so replacing them keeps every line number.
            text = self.text.replace("\t", " ") if self.is_json else self.text
            roots: list[yaml.Node] = []
            loader = _Loader(text)
            try:
                while loader.check_node():
                    node = loader.get_node()
                    if node is not None:
                        roots.append(node)
            except yaml.YAMLError:
                pass  # only JSON that YAML cannot read gets here: its lines stay unknown
            finally:
                loader.dispose()
            self._roots = roots
        return self._roots[index] if index < len(self._roots) else None


@dataclass(slots=True)
class Document:
    """One Kubernetes object read from a source: its data and the way back to its lines.

    ``base`` is the object's own path inside its YAML document (``items[3]`` for an item of a
    ``kind: List``); field paths given to :meth:`line_of` and errors are relative to the object.
    """

    data: dict[str, Any]
    source: Source
    index: int
    # Where the object starts, when known without composing the file again (YAML input).
    line: int | None
    base: str = ""

    @property
    def kind(self) -> str:
        kind = self.data.get("kind")
        return kind if isinstance(kind, str) else ""

    @property
    def api_version(self) -> str:
        api = self.data.get("apiVersion")
        return api if isinstance(api, str) else ""

    def line_of(self, path: str) -> int | None:
        """1-based line of ``path``, or of its nearest ancestor that exists in the file."""
        root = self.source.root(self.index)
        if root is None:
            return self.line
        return _node_line(root, join_path(self.base, path))

    def locate(self, err: InputError) -> InputError:
        """``err`` placed in this document: source, the line of its field, the full field path."""
        line = err.line
        if line is None:
            line = self.line_of(err.field or "") if err.field or self.line is None else self.line
        return err.at(source=self.source.name, line=line, field=self.base or None)

    @contextmanager
    def located(self, under: str | None = None) -> Iterator[None]:
        """Re-raise an InputError from the block located in this document (``under`` a field)."""
        try:
            yield
        except InputError as err:
            raise self.locate(err if under is None else err.at(field=under)) from None

    def error(self, message: str, *, field: str | None = None,
              expected: str | None = None) -> InputError:
        """A new InputError located at ``field`` of this document."""
        return self.locate(InputError(message, field=field, expected=expected))


def join_path(base: str, path: str) -> str:
    """Append a relative field path (``spec.x`` or ``[2].y``) to ``base``."""
    if not base:
        return path
    if not path:
        return base
    return base + path if path.startswith("[") else f"{base}.{path}"


_INDEX = re.compile(r"\[(\d+)\]")
_KEY = re.compile(r"\[([^\]]+)\]")


def _step(rest: str, keys: Iterable[object]) -> tuple[int | str, str] | None:
    """The first step of a path (its leading dot stripped) and what follows: ``[i]`` as the
    index, ``[key]`` or a leading key as the mapping key it names; None when it names neither.

    Mapping keys may contain dots (``nvidia.com/gpu``, ``app.kubernetes.io/name``), so the
    longest of ``keys`` that prefixes the path wins.
    """
    if rest[0] == "[":
        m = _INDEX.match(rest)
        if m is not None:
            return int(m[1]), rest[m.end():]
        m = _KEY.match(rest)  # upstream writes map keys so: requests[nvidia.com/gpu]
        return (m[1], rest[m.end():]) if m is not None and m[1] in set(keys) else None
    best = ""
    for key in keys:
        if (isinstance(key, str) and key and rest.startswith(key)
                and (len(rest) == len(key) or rest[len(key)] in ".[") and len(key) > len(best)):
            best = key
    return (best, rest[len(best):]) if best else None


def _node_line(node: yaml.Node, path: str) -> int:
    """Walk ``path`` through a node tree as far as it exists; return that node's line."""
    line: int = node.start_mark.line + 1
    rest = path
    while rest := rest.lstrip("."):
        mapping = node.value if isinstance(node, yaml.MappingNode) else []
        step = _step(rest, (k.value for k, _ in mapping if isinstance(k, yaml.ScalarNode)))
        if step is None:
            break
        where, rest = step
        if isinstance(where, str):
            key_node, node = next((k, v) for k, v in mapping
                                  if isinstance(k, yaml.ScalarNode) and k.value == where)
            line = key_node.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and where < len(node.value):
            node = node.value[where]
            line = node.start_mark.line + 1
        else:
            break
    return line


def read_source(path: str | Path) -> Source:
    """Read a file (or standard input for ``-``) as UTF-8 text."""
    name = str(path)
    if name == STDIN:
        text = sys.stdin.read(MAX_SOURCE_BYTES + 1)
        if len(text) > MAX_SOURCE_BYTES:
            raise InputError(f"standard input is over {MAX_SOURCE_BYTES} characters",
                             source="<stdin>", expected=_EXPECT_SIZE)
        return Source("<stdin>", text)
    try:
        size = Path(path).stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise InputError(f"the file is {size} bytes, over the limit of {MAX_SOURCE_BYTES}",
                             source=name, expected=_EXPECT_SIZE)
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", source=name,
                         expected="a UTF-8 encoded YAML or JSON file") from None
    except OSError as err:
        raise InputError(f"cannot read the file: {err.strerror or err}", source=name,
                         expected="a readable YAML or JSON file") from None
    return Source(name, text, is_json=name.endswith(".json"))


def load_documents(path: str | Path) -> list[Document]:
    """Every object in a file: its documents, with ``kind: List`` items split out."""
    return parse_source(read_source(path))


def parse_source(source: Source) -> list[Document]:
    """Split a source into objects; malformed input raises InputError with the parser's line."""
    stripped = source.text.lstrip()
    if source.is_json or stripped.startswith(("{", "[")):
        try:
            value = json.loads(source.text, object_hook=_without_nulls,
                               parse_constant=_not_json, parse_int=_json_int)
        except _NotJson as err:
            line = source.text.count("\n", 0, max(source.text.find(err.token), 0)) + 1
            raise InputError(f"invalid JSON: {err.token} is not a JSON number",
                             source=source.name, line=line,
                             expected="finite numbers (JSON has no NaN or Infinity)") from None
        except json.JSONDecodeError as err:
            if source.is_json:
                raise InputError(f"invalid JSON: {err.msg} (column {err.colno})",
                                 source=source.name, line=err.lineno,
                                 expected="a JSON object or list of objects") from None
        except RecursionError:
            # The decoder's recursion guard stops near MAX_NESTING levels; said as YAML says it.
            raise InputError(f"invalid JSON: nesting deeper than {MAX_NESTING} levels",
                             source=source.name, expected=_EXPECT_NESTING) from None
        else:
            source.is_json = True
            return _split(source, 0, value, None)
    docs: list[Document] = []
    loader = _Loader(source.text)
    may_alias = "*" in source.text
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            value = loader.construct_document(node)
            if may_alias and node is not None:
                check_expansion(value, source.name, node.start_mark.line + 1)
            docs.extend(_split(source, index, value, node))
            index += 1
    except yaml.MarkedYAMLError as err:
        raise _yaml_error(source, err) from None
    except yaml.YAMLError as err:
        raise InputError(f"invalid YAML: {err}", source=source.name,
                         expected=EXPECTED_YAML) from None
    finally:
        loader.dispose()
    return docs


def check_expansion(value: Any, source: str, line: int | None = None) -> None:
    """Refuse a decoded YAML document whose shared (aliased) values expand it past
    :data:`MAX_ALIAS_EXPANSION` values when walked; cost linear in its distinct values."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, done = stack.pop()
        children = item.values() if isinstance(item, dict) else item \
            if isinstance(item, list) else None
        if children is None or (not done and id(item) in sizes):
            continue
        if not done:
            sizes[id(item)] = -1  # in progress: a container that holds itself is a loop
            stack.append((item, True))
            stack.extend((c, False) for c in children if isinstance(c, dict | list))
            continue
        total = 1 + sum(sizes.get(id(c), 1) if isinstance(c, dict | list) else 1
                        for c in children)
        if any(sizes.get(id(c)) == -1 for c in children if isinstance(c, dict | list)) \
                or total > MAX_ALIAS_EXPANSION:
            raise InputError(f"YAML aliases expand the document past {MAX_ALIAS_EXPANSION:,} "
                             "values (or make it contain itself)", source=source, line=line,
                             expected=_EXPECT_ALIASES)
        sizes[id(item)] = total


def _split(source: Source, index: int, value: Any, node: yaml.Node | None) -> list[Document]:
    """One document's objects: none for an empty document, the items of a list kind."""
    if value is None:
        return []
    line = node.start_mark.line + 1 if node is not None else None
    if not isinstance(value, dict):
        raise InputError(f"the document is a {_kind_of(value)}, not an object", source=source.name,
                         line=line, expected="a mapping with apiVersion, kind and metadata")
    kind = value.get("kind")
    items = value.get("items")
    if isinstance(kind, str) and kind.endswith("List") and "items" in value:
        if not isinstance(items, list):
            raise InputError(f"items is a {_kind_of(items)}", source=source.name, line=line,
                             field="items", expected="a list of objects")
        item_node = _mapping_value(node, "items")
        api = value.get("apiVersion")
        item_kind = kind[: -len("List")]
        return [_item(source, index, item, f"items[{i}]", _child_line(item_node, i, line),
                      item_kind, api if isinstance(api, str) else "")
                for i, item in enumerate(items)]
    return [Document(value, source, index, line)]


def _item(source: Source, index: int, item: Any, base: str, line: int | None, kind: str,
          api: str) -> Document:
    if not isinstance(item, dict):
        raise InputError(f"the list item is a {_kind_of(item)}, not an object",
                         source=source.name, line=line, field=base,
                         expected="a mapping with apiVersion, kind and metadata")
    # Typed lists (PodList from the API) leave kind and apiVersion off their items.
    if kind and "kind" not in item:
        item["kind"] = kind
        if api and "apiVersion" not in item:
            item["apiVersion"] = api
    return Document(item, source, index, line, base)


def _mapping_value(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                found: yaml.Node = value_node
                return found
    return None


def _child_line(node: yaml.Node | None, i: int, default: int | None) -> int | None:
    if isinstance(node, yaml.SequenceNode) and i < len(node.value):
        return int(node.value[i].start_mark.line) + 1
    return default


def _yaml_error(source: Source, err: yaml.MarkedYAMLError) -> InputError:
    problem = (err.problem or str(err)).strip()
    text = _PLAIN_PROBLEMS.get(problem, problem)
    mark = err.problem_mark or err.context_mark
    if mark is not None and problem == _TOKEN_PROBLEM and _char_at(source.text, mark) == "\t":
        text = "a tab character; YAML indents with spaces only"
    if err.context and err.context_mark is not None and err.problem_mark is not None \
            and err.context_mark.line != err.problem_mark.line:
        text += f" ({err.context} that starts on line {err.context_mark.line + 1})"
    where = f" at column {mark.column + 1}" if mark is not None else ""
    line = mark.line + 1 if mark is not None else None
    expected = "each key at most once in a mapping" if isinstance(err, _DuplicateKey) \
        else EXPECTED_YAML
    return InputError(f"invalid YAML{where}: {text}", source=source.name, line=line,
                      expected=expected)


def _char_at(text: str, mark: yaml.Mark) -> str:
    lines = text.splitlines()
    if mark.line < len(lines) and mark.column < len(lines[mark.line]):
        return lines[mark.line][mark.column]
    return ""


# What a value read from YAML is, in the words of an error message (bool before int: a bool is
# an int to Python).
_KIND_WORDS: tuple[tuple[type, str], ...] = (
    (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "list"),
    (dict, "mapping"), (type(None), "null"))


def _kind_of(value: Any) -> str:
    return next((word for kind, word in _KIND_WORDS if isinstance(value, kind)),
                type(value).__name__)


# ---- typed conversion -------------------------------------------------------------------------

_MSGSPEC_ERROR = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_EXPECTED_GOT = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`$")
_TYPE_WORDS = {
    "int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
    "object": "a mapping", "array": "a list", "null": "null",
}
_GOT_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (float,), "str": (str,), "bool": (bool,), "object": (dict,),
    "array": (list,), "null": (type(None),),
}


class _NotJson(ValueError):
    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


def _not_json(token: str) -> Any:
    """Python's decoder reads NaN and Infinity; Go's, like the JSON grammar, does not."""
    raise _NotJson(token)


def _without_nulls(obj: dict[str, Any]) -> dict[str, Any]:
    """JSON objects without ``key: null`` entries (Kubernetes decodes null as "not set")."""
    if None in obj.values():
        return {k: v for k, v in obj.items() if v is not None}
    return obj


def convert(doc: Document, type_: type[_T]) -> _T:
    """Decode ``doc`` into a msgspec type with Kubernetes' typing rules, errors located.

    Decoding is strict about scalar types (a quoted ``"3"`` is not an integer), as kubectl is;
    unions such as ``int | str`` for IntOrString and quantities accept both forms.
    """
    try:
        return msgspec.convert(doc.data, type_, strict=True)
    except msgspec.ValidationError as err:
        raise doc.locate(validation_error(str(err), doc.data)) from None


def validation_error(text: str, data: Any) -> InputError:
    """Turn a msgspec validation message (with its ``$.a.b[0]`` path) into an InputError."""
    m = _MSGSPEC_ERROR.match(text)
    msg = m["msg"] if m else text
    path = (m["path"] or "").lstrip(".") if m else ""
    eg = _EXPECTED_GOT.match(msg)
    if path.endswith("[...]"):
        # msgspec does not say which mapping key failed; find the first value of the type it got.
        path = path[: -len("[...]")]
        parent = _lookup(data, path)
        wanted = _GOT_TYPES.get(eg["got"], ()) if eg else ()
        if isinstance(parent, dict):
            for key, value in parent.items():
                if not wanted or (isinstance(value, wanted)
                                  and not (bool not in wanted and isinstance(value, bool))):
                    path = f"{path}.{key}" if path else str(key)
                    break
    if eg:
        value = _lookup(data, path)
        shown = "" if isinstance(value, dict | list) else f" {value!r}"
        return InputError(f"got {_TYPE_WORDS.get(eg['got'], eg['got'])}{shown}",
                          field=path or None, expected=_type_words(eg["want"]))
    missing = _MISSING.match(msg)
    if missing:
        name = missing["name"]
        return InputError(f"required field {name} is missing",
                          field=f"{path}.{name}" if path else name,
                          expected=f"a value for {name}")
    return InputError(msg, field=path or None)


def _type_words(want: str) -> str:
    words = [_TYPE_WORDS.get(part.strip(), part.strip()) for part in want.split("|")]
    words = [w for w in words if w != "null"] or words
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _lookup(data: Any, path: str) -> Any:
    """The value at ``path`` in plain data (the same walk as :func:`_node_line`)."""
    rest = path
    while rest := rest.lstrip("."):
        step = _step(rest, data if isinstance(data, dict) else ())
        if step is None:
            return None
        where, rest = step
        if isinstance(where, int) and not (isinstance(data, list) and where < len(data)):
            return None
        data = data[where]
    return data
