"""Where a sweep's zarr store lives: a local folder, or any fsspec URL (object storage).

By default the store of `runs/x.nc` is the folder `runs/x.nc.zarr`; `store=` (or
`[output] store`) puts it elsewhere: another path, or a URL such as `s3://bucket/x.zarr`,
`gs://…`, `az://…` or `memory://x.zarr`, opened through fsspec (credentials as that
filesystem reads them, e.g. `AWS_*` variables or `~/.aws` for `s3fs`). This module knows how
to open, probe and delete a location; which stores may be deleted is `_store`'s decision.
"""

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

# Files zarr's local store leaves behind when killed mid-write (`<key>.<uuid>.partial`).
PARTIAL = ".partial"


@dataclasses.dataclass(frozen=True)
class StoreLocation:
    """A store's address: `url` (as given, or the default local path), and `local`, the
    folder when the store is on the local filesystem (`None` for a remote URL)."""

    url: str
    local: Path | None

    @classmethod
    def of(cls, output: Path, store: "str | os.PathLike | StoreLocation | None") -> "StoreLocation":
        """The location of the store for `output`: `store`, or `<output>.zarr` beside it."""
        if isinstance(store, StoreLocation):
            return store
        if store is None:
            path = output.with_name(output.name + ".zarr")
            return cls(str(path), path)
        import fsspec.core  # lazily, with zarr: only sweeps with an output need it

        text = os.fspath(store)
        protocol, rest = fsspec.core.split_protocol(text)
        if protocol in (None, "file", "local"):
            return cls(text, Path(rest))
        return cls(text, None)

    def __str__(self) -> str:
        return self.url

    def zarr_store(self, *, read_only: bool = False) -> Any:
        """A zarr `Store` on this location."""
        import zarr.storage

        if self.local is not None:
            return zarr.storage.LocalStore(self.local, read_only=read_only)
        return zarr.storage.FsspecStore.from_url(self.url, read_only=read_only)

    def exists(self) -> bool:
        """Whether anything is at this location (a link or file counts)."""
        if self.local is not None:
            return os.path.lexists(self.local)
        fs, path = self._fs()
        return bool(fs.exists(path))

    def is_folder(self) -> bool:
        """Whether the location is a real folder (locally: not a link); remote: always."""
        if self.local is None:
            return True
        return self.local.is_dir() and not self.local.is_symlink()

    def only_partial_files(self) -> bool:
        """Whether the folder holds nothing but files zarr leaves when killed mid-write (or
        nothing at all): what a store killed before its metadata was written looks like."""
        if self.local is not None:
            names = [p.name for p in self.local.rglob("*") if not p.is_dir()]
        else:
            fs, path = self._fs()
            names = [p.rsplit("/", 1)[-1] for p in fs.find(path)]
        return all(name.endswith(PARTIAL) for name in names)

    def remove(self) -> None:
        """Delete the store and everything in it (callers check ownership first)."""
        if self.local is not None:
            if self.local.is_symlink() or self.local.is_file():
                self.local.unlink()
            elif self.local.exists():
                shutil.rmtree(self.local)
            return
        fs, path = self._fs()
        if fs.exists(path):
            fs.rm(path, recursive=True)

    def _fs(self):
        import fsspec.core

        return fsspec.core.url_to_fs(self.url)
