"""Make the figures of the examples gallery (docs/examples.md) from the shipped configs.

Each example runs through the `difsim` command line as a reader runs it from the repository
root (`difsim run experiments/NAME.toml`), except that the netCDF file goes to a scratch
folder (`-o`), so runs/ is left alone; the PNG the command writes next to it (its quick-look
figure, drawn by `ds.plot` by the model's conventions) becomes the gallery's figure: the
path the example's section already shows, else `docs/img/NAME.png`. Figures are stored as
256-colour PNGs (the Pillow palette closest to the figure: nothing visible is lost) and
shrunk until they are at most `--max-kb` (150 kB), so the site stays light.

```
python experiments/make_gallery.py lorenz pendulum     # these examples
python experiments/make_gallery.py --missing           # every example without a figure
python experiments/make_gallery.py --all               # all (gray_scott_atlas: ~6 min)
```

An example new to the gallery then needs its line in its section of docs/examples.md,
`![NAME](img/NAME.png)` (the script prints it); tests/test_docs_site.py checks that every
example has one and that the file exists.
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "docs" / "examples.md"
_SECTION = re.compile(r"^### (\w+)\n(.*?)(?=^##|\Z)", flags=re.M | re.S)
_IMAGE = re.compile(r"!\[[^\]]*\]\((img/[^)]+\.png)\)")


def gallery_figures() -> dict[str, Path | None]:
    """Example name → the figure its section of docs/examples.md shows (None: none yet)."""
    out = {}
    for match in _SECTION.finditer(GALLERY.read_text()):
        image = _IMAGE.search(match[2])
        out[match[1]] = ROOT / "docs" / image[1] if image else None
    return out


def run_example(name: str, folder: Path) -> Path:
    """Run `experiments/NAME.toml` with the command line, writing into `folder`; its PNG."""
    output = folder / f"{name}.nc"
    command = [sys.executable, "-m", "difsim", "run", f"experiments/{name}.toml", "-o", str(output)]
    print("$ difsim", " ".join(command[3:]), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)
    png = output.with_suffix(".png")
    if not png.is_file():
        raise SystemExit(f"{name}: the run wrote no figure (is [output] plot false?)")
    return png


def _palette(image: Image.Image) -> Image.Image:
    """`image` in 256 colours, by whichever of Pillow's palette methods strays least from it
    at its worst pixel: median cut merges the few pixels of a marker into their neighbours'
    colour, maximum coverage bands a colour bar; the figure decides which harms it less."""
    original = np.asarray(image, dtype=np.int16)
    best = None
    for method in (Image.Quantize.MAXCOVERAGE, Image.Quantize.MEDIANCUT, Image.Quantize.FASTOCTREE):
        quantised = image.quantize(256, method=method)
        error = np.abs(np.asarray(quantised.convert("RGB"), dtype=np.int16) - original).max()
        if best is None or error < best[0]:
            best = (error, quantised)
    return best[1]


def optimise(source: Path, target: Path, max_bytes: int) -> int:
    """Write `source` to `target` as a palette PNG of at most `max_bytes`, scaled down by
    steps of 10 % while it is larger. Returns the size in bytes."""
    image = Image.open(source).convert("RGB")
    scale = 1.0
    while True:
        size = (round(image.width * scale), round(image.height * scale))
        scaled = image if scale == 1.0 else image.resize(size, Image.Resampling.LANCZOS)
        _palette(scaled).save(target, optimize=True)
        written = target.stat().st_size
        if written <= max_bytes or scale < 0.35:
            return written
        scale *= 0.9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="examples to draw (config names)")
    parser.add_argument("--missing", action="store_true", help="every example without a figure")
    parser.add_argument("--all", action="store_true", help="every example")
    parser.add_argument("--max-kb", type=float, default=150.0, help="largest figure (kB)")
    args = parser.parse_args(argv)
    figures = gallery_figures()
    unknown = sorted(set(args.names) - set(figures))
    if unknown:
        parser.error(f"not in docs/examples.md: {unknown}; examples are {sorted(figures)}")
    names = list(args.names)
    if args.all or args.missing:
        names += [n for n, f in figures.items() if args.all or f is None or not f.is_file()]
    if not names:
        parser.error("name examples, or give --missing or --all")
    with tempfile.TemporaryDirectory(prefix="difsim-gallery-") as scratch:
        for name in dict.fromkeys(names):
            target = figures[name] or ROOT / "docs" / "img" / f"{name}.png"
            written = optimise(run_example(name, Path(scratch)), target, int(args.max_kb * 1e3))
            print(f"{target.relative_to(ROOT)}: {written / 1e3:.0f} kB", flush=True)
            if figures[name] is None:
                print(f"  add to its section of docs/examples.md: ![{name}](img/{name}.png)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
