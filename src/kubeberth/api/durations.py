"""Go durations (``time.ParseDuration``), as upstream configs and flags write them.

Upstream components take ``5m``, ``30s``, ``1h30m`` or ``500ms`` wherever a time is asked
for (``metav1.Duration`` in configs, ``pflag``'s duration flags); kubeberth reads them the same
way everywhere, and a bare number still means seconds, as kubeberth's flags always took it.
"""

from __future__ import annotations

import math
import re

from kubeberth.api.errors import InputError

_TERM = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
          "h": 3600.0}
EXPECTED = "a Go duration such as 30s, 5m, 1h30m or 500ms, or a number of seconds"


def parse_duration(text: str, field: str, *, negative: bool = False) -> float:
    """``text`` in seconds; ``field`` (the flag or config field) names it in the InputError a
    malformed or (unless ``negative``) negative value raises."""
    value = text.strip()
    try:
        seconds: float | None = float(value)
    except ValueError:
        seconds = _go(value)
    if seconds is None:
        raise InputError(f"{text!r} is not a duration", field=field, expected=EXPECTED)
    if not math.isfinite(seconds):
        raise InputError(f"{text!r} is not a finite duration", field=field, expected=EXPECTED)
    if seconds < 0 and not negative:
        raise InputError(f"{text!r} is negative", field=field,
                         expected="a duration of 0 or more, such as 30s or 5m")
    return seconds


def _go(value: str) -> float | None:
    """Go's grammar: an optional sign, then one or more number-and-unit terms (or a bare 0)."""
    sign = -1.0 if value.startswith("-") else 1.0
    body = value[1:] if value[:1] in "+-" else value
    if body == "0":
        return 0.0
    if not body or _TERM.sub("", body):
        return None
    return sign * sum(float(n) * _UNITS[u] for n, u in _TERM.findall(body))
