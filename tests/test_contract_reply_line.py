"""The CLI reply convention: exactly one strict JSON object followed by one LF.
The external adapter turns any other stdout into an indeterminate outcome."""

import pytest

from backends.contract import loads_reply_line
from backends.external.process import Indeterminate, parse_reply


def test_one_object_and_one_lf():
    assert loads_reply_line(b'{"ok":true}\n') == {"ok": True}


@pytest.mark.parametrize("raw, why", [
    (b'{"ok":true}', "one line ending in LF"),
    (b'{"ok":true}\n\n', "one line ending in LF"),
    (b'{"ok":true}\n{"ok":true}\n', "one line ending in LF"),
    (b'[1]\n', "not a JSON object"),
    (b'{"a":1,"a":2}\n', "not strict JSON"),
    (b'{"a":NaN}\n', "not strict JSON"),
])
def test_anything_else_is_refused(raw, why):
    with pytest.raises(ValueError, match=why):
        loads_reply_line(raw)


def test_the_external_adapter_treats_a_bad_reply_as_indeterminate():
    assert parse_reply(b'{"ok":true}\n') == {"ok": True}
    with pytest.raises(Indeterminate, match="one line ending in LF.*boom"):
        parse_reply(b'{"ok":true}', b"boom")
