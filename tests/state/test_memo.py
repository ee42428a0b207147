from __future__ import annotations

from kubeberth.state.memo import ShapeMemo


def test_memo_forgets_everything_at_its_limit() -> None:
    memo: ShapeMemo[int, str] = ShapeMemo(3)
    for k in range(3):
        assert memo.put(k, str(k)) == str(k)
    assert dict(memo) == {0: "0", 1: "1", 2: "2"}
    memo.put(3, "3")
    assert dict(memo) == {3: "3"}
    assert memo.get(0) is None and memo.get(3) == "3"
