"""``pinbench fetch <recipe> --write-pins``: the maintainer's tool that writes resolved values into pins.yaml.

A run never edits the package: it resolves a null pin once into this machine's resolved pins
(:mod:`pinbench.ops.machine_pins`).
A maintainer who wants those values to become the recipe's pins (so that every clone verifies against
them, and scorecards stop marking them "resolved at run time") runs ``--write-pins``: the nulls are resolved
exactly as a run resolves them (reusing this machine's resolved pins, so pins.yaml gets the values the cache
holds), then written into pins.yaml with a ruamel.yaml round trip that keeps comments, quoting, order and
layout. The change is then reviewed and committed like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinbench.core.files import read_data_file, write_atomic
from pinbench.core.pins import PinsError, load_pins
from pinbench.ops.machine_pins import Key, key_label, machine_pins_for, null_keys, resolve

if TYPE_CHECKING:
    from pinbench.core.recipe import Recipe


def _round_trip_yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096                       # never re-wrap a long URL or note
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.representer.add_representer(  # keep `key: null` as written (ruamel's default writes `key:`)
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null"))
    return yaml


def write_pins_values(path: Path | str, values: Mapping[Key, str]) -> None:
    """Set ``values`` (keys as in :mod:`pinbench.ops.machine_pins`) in pins.yaml, keeping everything else byte
    for byte where ruamel.yaml can; the result must load as valid pins or nothing is written."""
    path = Path(path)
    yaml = _round_trip_yaml()
    data = yaml.load(read_data_file(path, PinsError))
    for key, value in values.items():
        node = data[key[0]][key[1]]
        if len(key) == 4:
            node[key[2]][key[3]] = value
        else:
            node[key[2]] = value
    out = StringIO()
    yaml.dump(data, out)
    tmp = path.with_name(f".{path.name}.writing")
    try:
        tmp.write_text(out.getvalue(), encoding="utf-8")
        load_pins(tmp)  # never leave the package with a pins.yaml that does not load
    finally:
        tmp.unlink(missing_ok=True)
    write_atomic(path, out.getvalue())


def write_recipe_pins(recipe: Recipe, token: str | None = None, *, api: Any = None,
                      cache: Path | str | None = None) -> list[str]:
    """Resolve the recipe's nulls (through this machine's resolved pins) and write them into its pins.yaml; list
    what changed."""
    pins = load_pins(recipe.pins_path)
    machine = machine_pins_for(recipe, cache)
    resolve(pins, machine, token=token, api=api, cache=cache)
    values = {key: machine.entries[key].value for key in null_keys(pins) if key in machine.entries}
    if values:
        write_pins_values(recipe.pins_path, values)
    return [f"{key_label(key)} = {value}" for key, value in values.items()]
