"""What a backend kind checks of a study model's arms, beyond the study's field rules: the
precision formats or files they name exist. Each kind registers its check with itself
(`register_backend(..., check_arms=...)`), so the study asks the registry instead of
guessing a kind's format from the fields it takes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from flatscore.errors import InputError

if TYPE_CHECKING:
    from flatscore.study import ArmSpec, ModelSpec


def check_torch_arms(model: ModelSpec, i: int, file: str | None) -> None:
    """Torch in-process: every arm names an in-process precision format (`ARMS`)."""
    from flatscore.models.quant.arms import ARMS  # imports torch (the `local` extra)
    from flatscore.models.quant.recipes import RECIPES

    for arm_name, arm in model.arms.items():
        if arm.control_of is not None:
            continue  # it runs the arm it replicates, checked as that arm
        if arm.inject is not None:
            continue  # its base arm is checked
        if (arm.quant or arm_name) not in ARMS and (arm.quant or arm_name) not in RECIPES:
            known = ", ".join([*ARMS.names(), *RECIPES])
            raise unknown_quant("precision format", known, arm_name, arm, i, file)


def check_gguf_arms(model: ModelSpec, i: int, file: str | None) -> None:
    """llama.cpp: every file exists and is a GGUF, every quant type is known, and the extra
    that runs them is installed (checked last, so file mistakes show without it too)."""
    from flatscore.models.gguf_files import EXTRA_HINT as GGUF_EXTRA
    from flatscore.models.gguf_files import (
        check_gguf_file,
        check_reference,
        known_quants,
        llama_cpp_available,
        quant_type,
    )

    def check(where: str, action: Any) -> None:
        try:
            action()
        except InputError as exc:
            name = f" ({exc.file})" if exc.file else ""
            raise InputError(f"{exc.message}{name}", file=file, field=where) from None

    played = {model.played_by(a) for a in model.arms}
    if any(model.arms[a].file is None for a in played):
        check(f"models.{i}.path", lambda: check_reference(model.path or "embedded"))
    for arm_name in sorted(played):
        arm = model.arms[arm_name]
        if arm.file is not None:
            path = Path(arm.file).expanduser()
            check(f"models.{i}.arms.{arm_name}.file", lambda p=path: check_gguf_file(p))
        elif quant_type(arm.quant or arm_name) is None:
            known = known_quants()
            raise unknown_quant("GGUF quant type", known, arm_name, arm, i, file, " or 'file'")
    if not llama_cpp_available():
        raise InputError(GGUF_EXTRA, file=file, field=f"models.{i}.kind")


def unknown_quant(
    what: str, known: str, arm_name: str, arm: ArmSpec, i: int, file: str | None, also: str = ""
) -> InputError:
    """An arm whose quantization (its `quant`, else its name) is none of `known`, naming the
    field to fix."""
    where = "quant" if arm.quant else "(name)"
    return InputError(
        f"unknown {what} {arm.quant or arm_name!r} (known: {known}); name the arm after one, "
        f"or give 'quant'{also}",
        file=file,
        field=f"models.{i}.arms.{arm_name}.{where}",
    )
