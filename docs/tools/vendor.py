"""mkdocs hook (mkdocs.yml `hooks:`): the site's JavaScript renderers, bundled into the
built site so that it works offline: MathJax (formulas) and Mermaid (diagrams).

Each renderer is one file of a pinned npm package. The package's tarball is fetched once
with `npm pack` into `build/vendor/` (kept between builds; a tarball already there, e.g.
copied onto an offline machine, is used as it is), checked against the pinned sha512
integrity of the npm registry, and the file is copied with the package's licence into
`<site>/vendor/<package>/`. Nothing of it is committed to the repository.

mkdocs.yml's `extra_javascript` loads the copies (`SCRIPTS`); `check_offline.py` checks
that the built pages load nothing from another host, `check_math.py` that every formula
typesets with this MathJax.
"""

import base64
import hashlib
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "vendor"


@dataclass(frozen=True)
class Package:
    """One pinned npm package and the file of it that the site loads."""

    name: str
    version: str
    integrity: str  # the registry's `dist.integrity` of the tarball: "sha512-<base64>"
    member: str  # the file inside the tarball's `package/` folder
    licence: str = "LICENSE"

    @property
    def tarball(self) -> Path:
        return CACHE / f"{self.name}-{self.version}.tgz"

    @property
    def script(self) -> str:
        """Where the site holds the file, relative to the site's root."""
        return f"vendor/{self.name}/{Path(self.member).name}"


# SVG output needs no web fonts, so tex-svg.js is the whole MathJax renderer (the TeX the
# pages use is in its base and AMS packages: nothing is autoloaded from elsewhere).
MATHJAX = Package(
    "mathjax",
    "3.2.2",
    "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
    "es5/tex-svg.js",
)
# mkdocs-material fetches mermaid@11 from unpkg.com unless a global `mermaid` is defined:
# this copy defines it.
MERMAID = Package(
    "mermaid",
    "11.12.2",
    "sha512-n34QPDPEKmaeCG4WDMGy0OT6PSyxKCfy2pJgShP+Qow2KLrvWjclwbc3yXfSIf4BanqWEhQEpngWwNp/XhZt6w==",
    "dist/mermaid.min.js",
)
PACKAGES = (MATHJAX, MERMAID)
SCRIPTS = {p.name: p.script for p in PACKAGES}


def _integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch(package: Package) -> Path:
    """The package's tarball in `build/vendor/`, fetched with `npm pack` if absent.

    **Raises:** `RuntimeError` naming the package: npm missing or failing, or a tarball
    whose sha512 is not the pinned one (it is then deleted, so the next build fetches it
    again)."""
    spec = f"{package.name}@{package.version}"
    if not package.tarball.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        if shutil.which("npm") is None:
            raise RuntimeError(
                f"the docs bundle {spec}: npm is not installed; install Node.js, or put "
                f"the registry's {package.tarball.name} into {CACHE}"
            )
        run = subprocess.run(
            ["npm", "pack", spec, "--pack-destination", str(CACHE)],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0 or not package.tarball.is_file():
            raise RuntimeError(f"npm pack {spec} failed:\n{run.stderr.strip()}")
    found = _integrity(package.tarball)
    if found != package.integrity:
        package.tarball.unlink()
        raise RuntimeError(
            f"{package.tarball} is not {spec} as pinned in {Path(__file__).name}: "
            f"sha512 {found}, expected {package.integrity} (deleted)"
        )
    return package.tarball


def install(package: Package, site_dir: Path) -> Path:
    """Copy the package's file and licence from its checked tarball into `site_dir`;
    returns the file's path there."""
    target = site_dir / package.script
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fetch(package)) as tar:
        for member, dest in ((package.member, target), (package.licence, target.parent)):
            source = tar.extractfile(f"package/{member}")
            if source is None:
                raise RuntimeError(f"{package.tarball} has no file package/{member}")
            if dest.is_dir():
                dest = dest / Path(member).name
            with source, open(dest, "wb") as out:
                shutil.copyfileobj(source, out)
    return target


def on_post_build(config, **kwargs) -> None:
    """mkdocs event: after every build (`mkdocs build` and each rebuild of `mkdocs serve`)."""
    for package in PACKAGES:
        install(package, Path(config["site_dir"]))
