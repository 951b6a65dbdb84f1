"""Which files difsim may write: one ownership check for every output (simulation, sweep and
fit netCDF files, fit summaries, plots).

Every output difsim writes records what it is: the attribute (netCDF), text chunk (PNG) or
key (JSON) `difsim_output` names its kind, and `difsim_run` names the run that wrote it
(a hash of its settings; absent when written from Python without a config). Before any
work, each output path is checked ([`check_output`][]):

- its suffix fits its format (`.nc` for netCDF, `.png`, `.json`);
- it is not a directory, nor anything but a regular file (device, FIFO, socket, link);
- it is not a file the run reads (a fit's data, a checkpoint, the config);
- its folder exists and is writable, or can be created;
- if it exists, it is a difsim output of the same kind (anything else is never replaced,
  not even with `overwrite`), and either the same run wrote it or `overwrite` is given.

A path that fails raises [`OutputError`][], one line naming the path and the reason.
"""

import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

KIND_ATTR = "difsim_output"  # the netCDF attribute / PNG text key / JSON key naming the kind
RUN_ATTR = "difsim_run"  # ... and the one naming the run that wrote it

# Output kinds → the suffixes of their format.
NETCDF, PNG, JSON = (".nc", ".nc4"), (".png",), (".json",)
KINDS = {"simulation": NETCDF, "sweep": NETCDF, "fit": NETCDF, "fit summary": JSON, "plot": PNG}


class OutputError(ValueError):
    """An output path difsim will not write (wrong suffix, a directory, a file it does not
    own, an unwritable folder, a file in use by another run)."""


def recorded(path: str | os.PathLike) -> tuple[str | None, str | None]:
    """`(kind, run)` that the difsim output at `path` records, or `(None, None)` for a file
    difsim did not write (or cannot read)."""
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix in NETCDF:
            return _netcdf_marks(path)
        if suffix in PNG:
            return _png_marks(path)
        if suffix in JSON:
            data = json.loads(path.read_text(encoding="utf-8"))
            return _marks(data if isinstance(data, dict) else {})
    except Exception:  # not a file of that format at all: not ours
        pass
    return None, None


def _marks(values) -> tuple[str | None, str | None]:
    kind, run = values.get(KIND_ATTR), values.get(RUN_ATTR)
    return (kind if isinstance(kind, str) else None), (run if isinstance(run, str) else None)


def _netcdf_marks(path: Path) -> tuple[str | None, str | None]:
    import h5netcdf  # lazily: h5py costs ~0.2 s to import, and only outputs need it

    with h5netcdf.File(path, "r") as f:
        attrs = dict(f.attrs)
    kind, run = _marks(attrs)
    if kind is None and isinstance(attrs.get("sweep_hash"), str):
        # Sweep files written before `difsim_output` existed carry their sweep's hash.
        return "sweep", attrs["sweep_hash"]
    return kind, run


def _png_marks(path: Path) -> tuple[str | None, str | None]:
    from PIL import Image  # matplotlib's own PNG library; only needed for an existing plot

    with Image.open(path) as image:
        if image.format != "PNG":
            return None, None
        return _marks(dict(image.info))


def png_metadata(run: str | None = None) -> dict[str, str]:
    """The `metadata` that marks a PNG as a difsim plot (for `Figure.savefig`)."""
    return {KIND_ATTR: "plot", **({RUN_ATTR: run} if run else {})}


def check_output(
    path: str | os.PathLike,
    kind: str,
    *,
    overwrite: bool = False,
    run: str | None = None,
    reads: Iterable[str | os.PathLike] = (),
    name: str = "output",
) -> Path:
    """Check that `path` may receive the output `kind` (a key of `KINDS`); see the module
    docstring for the rules.

    **Arguments:** `overwrite` (replace an earlier difsim output of the same kind), `run`
    (this run's identity: an output recording the same one is replaced without
    `overwrite`), `reads` (files the run reads), `name` (how messages call the path, e.g.
    `"[output] path"`).

    **Returns:** `path` as a `Path`. **Raises:** [`OutputError`][].
    """
    path = check_target(path, kind, reads=reads, name=name)
    if not os.path.lexists(path):
        return path
    found, found_run = recorded(path)
    if overwrite or (run is not None and found_run == run):
        return path
    raise OutputError(
        f"{name} {path} exists (an earlier difsim {kind} output); refusing to replace it: "
        "choose a new path, or pass overwrite=True (difsim run --overwrite) to replace it"
    )


def check_target(
    path: str | os.PathLike, kind: str, *, reads: Iterable[str | os.PathLike] = (), name="output"
) -> Path:
    """[`check_output`][] without the last rule: every check but whether an existing difsim
    output of `kind` may be replaced (the sweep store decides that from its own hash)."""
    path = Path(path)
    suffixes = KINDS[kind]
    if path.suffix.lower() not in suffixes:
        raise OutputError(
            f"{name} {path}: a {kind} output must end in {' or '.join(suffixes)}, "
            f"not {path.suffix or '(no suffix)'!r}"
        )
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):  # the folder check says which
        info = None
    except OSError as e:
        raise OutputError(f"{name} {path}: cannot be used ({e.strerror})") from e
    if info is not None:
        _check_existing(path, info, kind, reads, name)
    check_folder(path.parent, name=f"{name} {path}")
    return path


def _check_existing(path: Path, info: os.stat_result, kind: str, reads, name: str) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{name} {path} is a directory; give a file path")
    if not stat.S_ISREG(info.st_mode):
        raise OutputError(
            f"{name} {path} is not a regular file (a link, device, FIFO or socket); "
            "difsim never replaces one: choose another path"
        )
    for other in reads:
        try:
            if os.path.samefile(path, other):
                raise OutputError(
                    f"{name} {path} is a file this run reads ({other}); choose another path"
                )
        except OSError:  # `other` does not exist (yet): it cannot be `path`
            continue
    found, _ = recorded(path)
    if found != kind:
        what = "a file difsim did not write" if found is None else f"a difsim {found} output"
        raise OutputError(
            f"{name} {path} exists and is not a difsim {kind} output ({what}); difsim never "
            "replaces it, not even with overwrite=True (--overwrite): choose another path"
        )


def check_folder(folder: str | os.PathLike, *, name: str = "output") -> None:
    """Check that files can be created in `folder`, or that it can be created: its nearest
    existing ancestor must be a directory difsim can write to. Tried with a real temporary
    file, so permissions, ACLs and read-only filesystems all count (root included)."""
    folder = Path(folder).absolute()
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(
            f"{name}: its folder {folder} cannot be created: {existing} is not a directory"
        )
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".difsim-probe-"):
            pass
    except OSError as e:
        where = "its folder" if existing == folder else "the folder to create it in,"
        raise OutputError(f"{name}: {where} {existing} is not writable ({e.strerror or e})") from e
