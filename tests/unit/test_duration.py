import pytest

from reconciler.core.base import duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("20s", 20),
        ("5m", 300),
        ("1h30m", 5400),
        ("500ms", 0.5),
        ("20", 20),
        ("1.5", 1.5),
        ("1m30s", 90),
        (" 7s ", 7),
    ],
)
def test_kubectl_durations(text: str, seconds: float) -> None:
    assert duration.parse(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "20x", "5 m", "-5s", "m5", "1h 30m", "20S"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="write it as kubectl does"):
        duration.parse(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(20, "20s"), (300, "5m"), (5400, "1h30m"), (0, "0s"), (90.4, "1m30s")]
)
def test_show(seconds: float, text: str) -> None:
    assert duration.show(seconds) == text
