"""Fault injection for the chaos tests: slow and failing bindings and evictions, dropped watches.

Off unless the environment variable :data:`ENV` is set (tests only; nothing else sets it). Its
value is ``key=value`` pairs separated by commas:

- ``bind.delay=S`` / ``evict.delay=S``: every ``pods/<name>/binding`` (``.../eviction``) POST
  waits S seconds before it is served (on the event loop, without blocking other clients);
- ``bind.fail=P`` / ``evict.fail=P``: with probability P it is answered 500 InternalError and
  not carried out;
- ``bind.lost=P`` / ``evict.lost=P``: with probability P it is carried out and still answered
  500, as when a reply is lost after the write (the client cannot tell the two apart);
- ``watch.drop=S``: every S seconds every open watch connection is closed;
- ``seed=N``: the seed of the dice (default 0), so a run is repeatable.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import msgspec
from aiohttp import web

from kubeberth.api.errors import InputError
from kubeberth.apiserver import errors
from kubeberth.apiserver.store import Store

ENV = "KUBEBERTH_TEST_FAULTS"
_KEYS = ("bind.delay", "bind.fail", "bind.lost", "evict.delay", "evict.fail", "evict.lost",
         "watch.drop", "seed")
_EXPECTED = ("comma-separated key=value pairs, keys " + ", ".join(_KEYS) +
             " (delays and periods in seconds, probabilities from 0 to 1)")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(slots=True)
class Faults:
    """What to inject, per subresource (``binding``, ``eviction``) and for watches."""

    delay: dict[str, float]
    fail: dict[str, float]
    lost: dict[str, float]
    watch_drop: float
    dice: random.Random
    injected: int = 0

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Faults | None:
        """The faults :data:`ENV` asks for; None when it is unset or empty."""
        raw = environ.get(ENV, "").strip()
        if not raw:
            return None
        values: dict[str, float] = {}
        for part in raw.split(","):
            key, sep, value = part.strip().partition("=")
            if not sep or key not in _KEYS:
                raise InputError(f"{part.strip()!r} is not a fault", field=ENV,
                                 expected=_EXPECTED)
            try:
                number = float(value)
            except ValueError:
                number = -1.0
            bound = 1.0 if key.endswith((".fail", ".lost")) else float("inf")
            if not 0 <= number <= bound:
                raise InputError(f"{key}={value!r} is out of range", field=ENV,
                                 expected=_EXPECTED)
            values[key] = number
        subs = {"binding": "bind", "eviction": "evict"}
        return cls(delay={s: values.get(f"{p}.delay", 0.0) for s, p in subs.items()},
                   fail={s: values.get(f"{p}.fail", 0.0) for s, p in subs.items()},
                   lost={s: values.get(f"{p}.lost", 0.0) for s, p in subs.items()},
                   watch_drop=values.get("watch.drop", 0.0),
                   dice=random.Random(int(values.get("seed", 0))))

    async def serve(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Serve ``request`` through ``handler``, delayed or failed as configured."""
        sub = request.path.rsplit("/", 1)[-1]
        if request.method != "POST" or sub not in self.delay:
            return await handler(request)
        if self.delay[sub]:
            await asyncio.sleep(self.delay[sub])
        roll = self.dice.random()
        if roll < self.fail[sub]:
            return self._error(sub, "not carried out")
        response = await handler(request)
        if roll < self.fail[sub] + self.lost[sub] and response.status < 300:
            return self._error(sub, "carried out, reply lost")
        return response

    def _error(self, sub: str, what: str) -> web.Response:
        self.injected += 1
        err = errors.ApiError(500, "InternalError", f"injected fault: {sub} {what}")
        return web.Response(body=msgspec.json.encode(err.status()), status=500,
                            content_type="application/json")

    async def drop_watches(self, store: Store) -> None:
        """Close every watch every ``watch_drop`` seconds (clients must re-list or resume)."""
        if self.watch_drop <= 0:
            return
        while True:
            await asyncio.sleep(self.watch_drop)
            store.close_watches()
