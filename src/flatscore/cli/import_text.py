"""What `flatscore import` warns about, in words: the importers return counts and statuses
(`formats.tau2_import.ImportSummary`), the command says them (`print_import_summary`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flatscore.formats.tau2_import import ImportSummary


def import_warnings(summary: ImportSummary) -> list[str]:
    """What the reader must know about the imported episodes, one line each: Inspect logs
    that did not finish, samples that raised in Inspect, episodes τ² crashed in."""
    out = [
        f"{f.path}: the eval's status is {f.status!r}: only the samples it finished are in the log"
        for f in summary.files
        if f.status not in (None, "success")
    ]
    if summary.inspect_errors:
        out.append(
            f"{summary.inspect_errors} of {summary.written} samples raised an error in Inspect: "
            "they are kept as infrastructure_error episodes (excluded from rates), see "
            "metadata.inspect_error"
        )
    out += [
        f"{n} of {summary.written} episodes ended in {reason}: τ² itself crashed "
        "(e.g. unparseable tool-call arguments); they count as failed episodes, "
        "with only the calls made before the crash (marked metadata.crashed)"
        for reason, n in summary.crashes.items()
    ]
    return out
