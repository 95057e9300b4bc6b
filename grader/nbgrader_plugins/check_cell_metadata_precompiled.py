"""nbgrader's ``CheckCellMetadata`` with nbgrader's metadata schema checked once per process, not once per cell.

nbgrader validates each graded cell's metadata with ``jsonschema.validate``, which first checks the schema itself
against JSON Schema's metaschema: about 150 times a student, since the sanitizing and the autograding each check all
six notebooks, and most of the check's time.  The schema is nbgrader's own file, the same for every cell, so it is
checked once, when the fork server imports this module (``grader.grading.nbgrader_process.WARM_IMPORTS``), and
every cell is validated by the one validator built from it.  What passes and what is refused, and with which error,
is nbgrader's: its version checks and grade-id rules run unchanged, and the error is jsonschema's best match, as
``jsonschema.validate`` raises it.
"""
from __future__ import annotations

import json
import traceback
from functools import lru_cache

from jsonschema import validators
from jsonschema.exceptions import best_match
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.nbgraderformat.common import BaseMetadataValidator
from nbgrader.preprocessors import CheckCellMetadata


@lru_cache(maxsize=None)
def compiled_validator(schema_json: str):
    """The validator of one schema (its JSON text, in its file's order: errors quote it), the schema checked against
    its metaschema once."""
    schema = json.loads(schema_json)
    kind = validators.validator_for(schema)
    kind.check_schema(schema)
    return kind(schema)


class _SchemaCheckedOnce(BaseMetadataValidator):
    """Between nbgrader's versioned validator and its base in the method order: the base's jsonschema call, with
    the validator built once."""

    def __init__(self) -> None:
        super().__init__()  # the base reads the schema's file
        self._compiled = compiled_validator(json.dumps(self.schema))

    def validate_cell(self, cell) -> None:
        meta = cell.metadata.get("nbgrader")
        if meta is None or meta.get("schema_version", 0) != self.schema_version:
            super().validate_cell(cell)  # nbgrader's own: nothing to check, or the version's error
            return
        error = best_match(self._compiled.iter_errors(meta))
        if error is not None:
            raise error


class _PrecompiledMetadataValidator(MetadataValidator, _SchemaCheckedOnce):
    """nbgrader's current validator (its grade-id and cell-type rules), whose schema step is ``_SchemaCheckedOnce``."""


class CheckCellMetadataPrecompiled(CheckCellMetadata):
    """``CheckCellMetadata``, refusing the same notebooks with the same message, at a fraction of its cost."""

    def preprocess(self, nb, resources):
        try:
            _PrecompiledMetadataValidator().validate_nb(nb)
        except ValidationError as error:
            self.log.error(traceback.format_exc())
            said = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(said)
            raise ValidationError(said) from error
        return nb, resources


_PrecompiledMetadataValidator()  # its validator, built in the fork server: every nbgrader process has it
