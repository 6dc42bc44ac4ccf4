from sparktui.core.config import GuardConfig
from sparktui.core.kernel import known_bad, off_pin, release_matches

G = GuardConfig(kernel_pin="6.17.0-1031", kernel_bad=("7.0.0-1019",))


def test_flavour_suffix_matches_but_a_longer_release_does_not():
    assert release_matches("6.17.0-1031-nvidia", "6.17.0-1031")
    assert release_matches("6.17.0-1031", "6.17.0-1031")
    assert not release_matches("6.17.0-10310-nvidia", "6.17.0-1031")


def test_known_bad_and_off_pin():
    assert known_bad(G, "7.0.0-1019-nvidia") == "7.0.0-1019"
    assert known_bad(G, "6.17.0-1031-nvidia") is None
    assert off_pin(G, "6.17.0-10310-nvidia") and not off_pin(G, "6.17.0-1031-nvidia")
    assert not off_pin(GuardConfig(kernel_pin=""), "anything")
