"""Known answers for `flatscore.store.redaction`: which registered key values and which
credential-shaped strings are masked, at the 8-character boundary and beyond it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from flatscore.store.redaction import MASK, register_secret, scrub, secrets_scope

# Registration is process-wide; every value here is unusual enough to appear nowhere else.
KEY_CHARS = st.sampled_from("QXZJKVW0123456789")


def test_an_8_character_key_is_masked() -> None:
    register_secret("Qz8kXw2J")  # exactly the shortest length that is registered
    assert scrub("the server said: key Qz8kXw2J refused") == f"the server said: key {MASK} refused"


def test_a_7_character_value_is_not_registered() -> None:
    register_secret("Vq7wZk3")  # shorter values would mask ordinary words
    assert scrub("value Vq7wZk3 here") == "value Vq7wZk3 here"


def test_empty_and_missing_values_are_ignored() -> None:
    register_secret("")
    register_secret(None)
    assert scrub("nothing to hide") == "nothing to hide"


def test_the_longest_registered_value_wins_over_its_prefix() -> None:
    register_secret("ZJQXKVW0")
    register_secret("ZJQXKVW0-and-more")
    assert scrub("ZJQXKVW0-and-more") == MASK


def test_a_digits_only_key_is_masked() -> None:
    register_secret("00000000")  # forgotten after this test (tests/conftest.py)
    assert scrub('{"at": 1.000000001}') == '{"at": 1.***1}'


def test_a_key_registered_in_a_scope_is_forgotten_after_it() -> None:
    register_secret("QXZJ-outer-key")
    with secrets_scope():
        register_secret("QXZJ-inner-key")
        assert scrub("QXZJ-inner-key QXZJ-outer-key") == f"{MASK} {MASK}"
    assert scrub("QXZJ-inner-key QXZJ-outer-key") == f"QXZJ-inner-key {MASK}"


def test_credential_shapes_are_masked_without_registration() -> None:
    assert scrub("Authorization: Bearer abc.def-123") == f"Authorization: {MASK}"
    assert scrub('{"x-api-key": "k-998877"}') == f'{{"x-api-key": "{MASK}"}}'
    assert scrub("sent bearer A1b2C3d4E5") == f"sent bearer {MASK}"
    assert scrub("a bearer of bad news") == "a bearer of bad news"  # not a credential


@given(
    key=st.text(KEY_CHARS, min_size=8, max_size=40),
    before=st.text(st.sampled_from("abc :{}\n"), max_size=20),
    after=st.text(st.sampled_from("abc :{}\n"), max_size=20),
)
def test_a_registered_key_never_survives_scrubbing(key: str, before: str, after: str) -> None:
    register_secret(key)
    assert key not in scrub(before + key + after)
