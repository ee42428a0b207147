"""The three PATCH flavours a Kubernetes API server accepts.

- JSON merge patch (RFC 7386, ``application/merge-patch+json``): maps merge, null deletes,
  lists are replaced.
- Strategic merge patch (``application/strategic-merge-patch+json``), what kubectl sends for
  built-in kinds (``kubectl apply``, ``taint``, ``cordon``, ``label``): like a merge patch, but
  the lists upstream marks with a merge key (containers by ``name``, conditions by ``type``,
  ownerReferences by ``uid``, schedulingGates by ``name``, ...) are merged element by element,
  ``finalizers`` is merged as a set, and the directives ``$patch``, ``$retainKeys``,
  ``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>`` are honoured. Lists that
  upstream leaves without a merge key (``taints``, ``tolerations``) are replaced, as upstream.
- JSON patch (RFC 6902, ``application/json-patch+json``).

The merge keys come from the upstream Go struct tags (``patchMergeKey``); pod-spec paths are
recognised under workload templates (``spec.template.spec``) too.
"""

from __future__ import annotations

import copy
from typing import Any

from kubeberth.apiserver.errors import ApiError, bad_request

_POD_SPEC_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "volumes": "name", "imagePullSecrets": "name", "schedulingGates": "name",
    "resourceClaims": "name", "hostAliases": "ip", "topologySpreadConstraints": "topologyKey",
}
_CONTAINER_KEYS = {"env": "name", "ports": "containerPort", "volumeMounts": "mountPath",
                   "volumeDevices": "devicePath", "resizePolicy": "resourceName"}
_MERGED_PRIMITIVES = {"metadata.finalizers"}
_POD_SPEC_PREFIXES = ("spec.", "spec.template.spec.", "spec.jobTemplate.spec.template.spec.")


def merge_key(path: str) -> str | None:
    """The merge key of the list at ``path`` (dotted, without indexes), None to replace it."""
    if path == "metadata.ownerReferences":
        return "uid"
    if path in ("status.conditions", "status.addresses"):
        return "type"
    for prefix in _POD_SPEC_PREFIXES:
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):]
        if rest in _POD_SPEC_KEYS:
            return _POD_SPEC_KEYS[rest]
        for containers in ("containers.", "initContainers.", "ephemeralContainers."):
            if rest.startswith(containers) and rest[len(containers):] in _CONTAINER_KEYS:
                return _CONTAINER_KEYS[rest[len(containers):]]
    return None


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply a strategic merge patch to a whole object."""
    merged = _merge_map(target, patch, "")
    return merged if merged is not None else {}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _merge_map(target: Any, patch: dict[str, Any], path: str) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive is not None:
        raise bad_request(f"unknown patch directive $patch: {directive!r} at {path or '.'} "
                          "(expected replace or delete)")
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$retainKeys",):
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value if isinstance(value, list) else []
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            drop = value if isinstance(value, list) else []
            current = result.get(name)
            if isinstance(current, list):
                result[name] = [v for v in current if v not in drop]
            continue
        sub = _join(path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(result.get(key), value, sub)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, sub)
        else:
            result[key] = value
    for name, order in orders.items():
        if isinstance(result.get(name), list):
            result[name] = _reorder(result[name], order, merge_key(_join(path, name)))
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(target: Any, patch: list[Any], path: str) -> list[Any]:
    current = list(target) if isinstance(target, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch
                if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if path in _MERGED_PRIMITIVES:
        return current + [v for v in patch if v not in current]
    key = merge_key(path)
    if key is None:
        return [copy.deepcopy(p) for p in patch]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise bad_request(f"{path}: every element of a merged list needs its merge key "
                              f"{key!r}")
        idx = next((i for i, cur in enumerate(current)
                    if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                current.pop(idx)
            continue
        if idx is None:
            current.append(_merge_map({}, item, path) or {})
        else:
            current[idx] = _merge_map(current[idx], item, path) or {}
    return current


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    if key is None:
        return items
    rank = {o.get(key): i for i, o in enumerate(order) if isinstance(o, dict)}
    known = [it for it in items if isinstance(it, dict) and it.get(key) in rank]
    rest = [it for it in items if not (isinstance(it, dict) and it.get(key) in rank)]
    known.sort(key=lambda it: rank[it.get(key)])
    return known + rest


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902; a failed ``test`` or a missing path is a 422, a malformed operation a 400."""
    if not isinstance(operations, list):
        raise bad_request("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for i, op in enumerate(operations):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"JSON patch operation {i} needs 'op' and 'path'")
        kind = op["op"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise bad_request(f"JSON patch operation {i} ({kind}) needs a 'value'")
        if kind in ("move", "copy") and "from" not in op:
            raise bad_request(f"JSON patch operation {i} ({kind}) needs 'from'")
        if kind == "add":
            doc = _put(doc, op["path"], copy.deepcopy(op["value"]), insert=True)
        elif kind == "remove":
            doc, _ = _remove(doc, op["path"])
        elif kind == "replace":
            _get(doc, op["path"])
            doc = _put(doc, op["path"], copy.deepcopy(op["value"]), insert=False)
        elif kind == "move":
            doc, value = _remove(doc, op["from"])
            doc = _put(doc, op["path"], value, insert=True)
        elif kind == "copy":
            doc = _put(doc, op["path"], copy.deepcopy(_get(doc, op["from"])), insert=True)
        elif kind == "test":
            if _get(doc, op["path"]) != op["value"]:
                raise _unprocessable(f"testing value {op['path']} failed")
        else:
            raise bad_request(f"unknown JSON patch operation {kind!r} "
                              "(expected add, remove, replace, move, copy or test)")
    return doc


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, "Invalid", f"the server rejected our request due to an error in our "
                    f"request: {message}")


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise bad_request(f"JSON pointer {pointer!r} must start with /")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(container: list[Any], token: str, pointer: str, *, insert: bool) -> int:
    if token == "-" and insert:
        return len(container)
    if not token.isdigit():
        raise _unprocessable(f"{pointer}: {token!r} is not a list index")
    idx = int(token)
    if idx > len(container) or (idx == len(container) and not insert):
        raise _unprocessable(f"{pointer}: index {idx} is out of range")
    return idx


def _get(doc: Any, pointer: str) -> Any:
    value = doc
    for token in _tokens(pointer):
        if isinstance(value, dict):
            if token not in value:
                raise _unprocessable(f"{pointer}: path does not exist")
            value = value[token]
        elif isinstance(value, list):
            value = value[_index(value, token, pointer, insert=False)]
        else:
            raise _unprocessable(f"{pointer}: path does not exist")
    return value


def _put(doc: Any, pointer: str, value: Any, *, insert: bool) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return value
    parent = _get(doc, "".join("/" + t.replace("~", "~0").replace("/", "~1")
                               for t in tokens[:-1]))
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        idx = _index(parent, last, pointer, insert=insert)
        if insert:
            parent.insert(idx, value)
        else:
            parent[idx] = value
    else:
        raise _unprocessable(f"{pointer}: parent is not an object or a list")
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    tokens = _tokens(pointer)
    if not tokens:
        raise _unprocessable("cannot remove the whole document")
    parent = _get(doc, "".join("/" + t.replace("~", "~0").replace("/", "~1")
                               for t in tokens[:-1]))
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"{pointer}: path does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, pointer, insert=False))
    raise _unprocessable(f"{pointer}: path does not exist")
