"""``parse_arch`` (``THORK_ARCH``, ``precompile(arch=)``), read without a regular
expression since session 11: every accepted spelling and every refusal, against a table
written from the documented forms."""

import pytest
from thork_core._arch import parse_arch


@pytest.mark.parametrize(("value", "want"), [
    ("sm_90", "sm_90"), ("90", "sm_90"), ("9.0", "sm_90"), ("compute_90", "sm_90"),
    (" SM_90A ", "sm_90a"), ("sm_100f", "sm_100f"), ("10.0a", "sm_100a"), ("8.6", "sm_86"),
    ("compute_75", "sm_75"), ("120", "sm_120"), ("12.0f", "sm_120f"),
])
def test_accepted_spellings(value, want):
    assert parse_arch(value) == want


@pytest.mark.parametrize("value", [
    "", "sm_", "sm90", "9.00", ".0", "sm_90b", "sm_90af", "9,0", "sm_9 0", "compute_sm_90",
    "sm_compute_90", "sm_\u0661\u0660\u0660", "sm_9\u00b2", "x90", "90.a.",
])
def test_malformed_values_name_the_forms(value):
    with pytest.raises(ValueError, match="must look like 'sm_90'"):
        parse_arch(value)


@pytest.mark.parametrize("value", ["sm_70", "7.", "6.1", "sm_8"])
def test_too_old_is_refused(value):
    with pytest.raises(ValueError, match="older than sm_75"):
        parse_arch(value)
