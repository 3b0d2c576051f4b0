"""JSON typed into an admin form: whatever the text holds, a form error, never a 500.

``json.loads`` raises more than ``JSONDecodeError``: ``ValueError`` for an integer longer than
Python reads from text (4,300 digits) and ``RecursionError`` for brackets nested deeper than
its stack. Django's ``forms.JSONField`` catches only the first, so both were server errors.
A lone surrogate (``"\\ud800"``) reads fine but cannot be written back into a UTF-8 page.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.forms.fields import InvalidJSONInput

from ..core.json_values import MAX_INT_BITS, MAX_JSON_DEPTH

TOO_LONG = (
    "It holds an integer too long to read; integers in job arguments have at most "
    f"{MAX_INT_BITS:,} bits (about 3,000 digits): pass longer numbers as strings."
)
TOO_DEEP = f"It nests deeper than {MAX_JSON_DEPTH} levels; JSON job arguments are a finite tree."


def load(text: str) -> Any:
    """``json.loads(text)``, or ``forms.ValidationError`` saying what is wrong with it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(f"Not valid JSON: {exc}.") from None
    except ValueError:  # JSONDecodeError is one too: keep this after it
        raise forms.ValidationError(TOO_LONG) from None
    except RecursionError:
        raise forms.ValidationError(TOO_DEEP) from None


class JSONInputField(forms.JSONField):
    """Django's JSON form field, with ``load``'s errors for what ``json.loads`` cannot read."""

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except ValueError:
            raise forms.ValidationError(TOO_LONG, code="invalid") from None
        except RecursionError:
            raise forms.ValidationError(TOO_DEEP, code="invalid") from None

    def prepare_value(self, value: Any) -> Any:
        """The value as JSON text; escaped when it holds a lone surrogate (typed as ``\\ud800``),
        which a UTF-8 page cannot carry: shown raw, the form's error page was a server error."""
        text = super().prepare_value(value)
        try:
            text.encode()
        except UnicodeEncodeError:
            return json.dumps(value, cls=self.encoder)
        return text

    def bound_data(self, data: Any, initial: Any) -> Any:
        """The typed text, shown again as typed when it cannot be read."""
        try:
            return super().bound_data(data, initial)
        except (ValueError, RecursionError):
            return InvalidJSONInput(data)
