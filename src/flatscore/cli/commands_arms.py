"""`flatscore arms make`: llm-compressor checkpoints of a model's reference weights
(`flatscore.models.quant.toolchain`). Thin: parse, make (or find in the cache), print."""

from __future__ import annotations

from typing import Annotated

import typer

from flatscore.cli.app import app, console

arms_app = typer.Typer(
    help="Precision arms made by a quantization toolchain (llm-compressor checkpoints).",
    no_args_is_help=True,
)
app.add_typer(arms_app, name="arms")


@arms_app.command("make")
def arms_make_command(
    recipes: Annotated[
        list[str],
        typer.Argument(help="llm-compressor recipes, by arm name (see `flatscore arms list`)."),
    ],
    model: Annotated[
        str, typer.Option(help="'embedded' (with its shipped adapter), a .gguf or a model folder.")
    ] = "embedded",
    adapter: Annotated[
        str | None, typer.Option(help="A LoRA adapter folder merged into the model first.")
    ] = None,
) -> None:
    """Make a compressed-tensors checkpoint per recipe from the model's reference weights
    with llm-compressor (in the `make quant-env` environment), calibrated on agent transcripts
    of the train split; cached by the reference's hash and the recipe."""
    from flatscore.cli.progress_text import checkpoint_step
    from flatscore.errors import InputError
    from flatscore.models.quant.recipes import get_recipe
    from flatscore.models.quant.toolchain import make_checkpoint

    try:
        chosen = [get_recipe(r) for r in recipes]
    except ValueError as exc:
        raise InputError(str(exc), field="RECIPES") from None
    for recipe in chosen:
        checkpoint = make_checkpoint(
            recipe,
            model,
            adapter,
            on_step=lambda s: console.print(checkpoint_step(s), highlight=False),
        )
        console.print(
            f"{recipe.name}: {checkpoint.path} (sha256 {checkpoint.sha256[:12]}, "
            f"made in {checkpoint.seconds} s)",
            highlight=False,
        )


@arms_app.command("list")
def arms_list_command() -> None:
    """The llm-compressor recipes a study arm may name as its `quant`."""
    from flatscore.models.quant.recipes import RECIPES

    for recipe in RECIPES.values():
        twin = f" (held against {recipe.twin})" if recipe.twin else ""
        console.print(f"{recipe.name}: {recipe.description}{twin}", highlight=False)
