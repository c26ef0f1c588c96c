"""The matrix's quick row check (the schema's own patterns, no jsonschema) says what jsonschema says."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.adapters.files import schemas
from reconciler.core.images import matrix

SCHEMA = schemas.load("matrix-row")
# Any keyword the quick check does not implement sends every row to jsonschema.
THOROUGH = {**SCHEMA, "$comment": "checked by jsonschema only"}
CELL = st.one_of(
    st.sampled_from(
        [
            *("550", "535", "5.15.0-119-generic", "ubuntu22.04", "rhel9", "", " ", "5.15\n", "550\n", "5.15"),
            *("5.15.0-" + "1" * 56, "5.15.0-" + "1" * 57, "ubuntu-22.04", "22.04"),  # 63 and 64 characters
        ]
    ),
    st.text(alphabet="0123456789abcXYZ._-+ \n\t\u00e9", max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(CELL, CELL, CELL), max_size=6))
def test_quick_and_thorough_agree(rows: list[tuple[str, str, str]]) -> None:
    lines = [matrix.HEADER, *(",".join(f'"{cell}"' for cell in row) for row in rows)]
    text = "\n".join(lines) + "\n"
    assert matrix.parse(text, SCHEMA) == matrix.parse(text, THOROUGH)
    for row in rows:
        key = matrix.ImageKey(*row)
        assert matrix.row_problems(key, SCHEMA) == matrix.row_problems(key, THOROUGH)


def test_a_valid_matrix_is_read_without_jsonschema() -> None:
    code = (
        "import sys; from reconciler.adapters.files import schemas; "
        "from reconciler.core.images import matrix; "
        "m = matrix.parse('driver_branch,kernel,os_tag\\n550,5.15.0-119-generic,ubuntu22.04\\n', "
        "schemas.load('matrix-row')); assert m.ok; print('jsonschema' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == "False\n"
