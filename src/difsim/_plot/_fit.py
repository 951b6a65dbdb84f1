"""Figures of a fit's Dataset (`difsim_output = "fit"`): per observed variable the data, the
fitted curve with its 95 % prediction band and the residuals below; the estimates with
their standard errors; the loss history."""

from pathlib import Path

import numpy as np
import xarray as xr

from difsim._plot._figure import finish_figure, label, set_log_scale


def estimates_text(dataset: xr.Dataset) -> list[str]:
    """One line per free parameter: `"name = value ± stderr units"`; then one per free
    array or network (its variables' attribute `free`): its shape or size, and range."""
    lines = []
    names = np.asarray(dataset["parameter"]).tolist() if "parameter" in dataset else []
    for i, name in enumerate(names):
        value, se = float(dataset["value"][i]), float(dataset["stderr"][i])
        units = str(dataset["parameter_units"][i].item()) if "parameter_units" in dataset else ""
        units = "" if units in ("", "1") else f" {units}"
        spread = f" ± {se:.2g}" if np.isfinite(se) else " (no std. error)"
        lines.append(f"{name} = {value:.4g}{spread}{units}")
    groups: dict[str, list[np.ndarray]] = {}
    for var in dataset.data_vars.values():
        if "free" in var.attrs and not str(var.name).endswith("_stderr"):
            groups.setdefault(var.attrs["free"], []).append(np.asarray(var, dtype=float))
    for name, arrays in groups.items():
        flat = np.concatenate([a.ravel() for a in arrays])
        shape = "x".join(str(n) for n in arrays[0].shape) if len(arrays) == 1 else ""
        what = f"[{shape}]" if shape else f"{flat.size} values"
        lines.append(f"{name}: {what} in [{np.min(flat):.3g}, {np.max(flat):.3g}]")
    return lines


def plot_fit(dataset: xr.Dataset, path: str | Path | None = None):
    """Plot a fit's Dataset (see `FitResult.to_xarray`): for each observed variable the
    data (markers), the fitted curve, its approximate 95 % prediction band (shaded) and
    the residuals in a panel below; a panel listing the estimates ± standard errors; the
    loss history. A lognormal fit is drawn on log value axes. With `path`, saved as PNG.

    **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).
    """
    from matplotlib.figure import Figure

    names = [n[: -len("_curve")] for n in dataset.data_vars if n.endswith("_curve")]
    if not names:
        raise ValueError("the dataset holds no fitted curve (variables <name>_curve)")
    coord = dataset[names[0]].dims[-1]
    log = dataset.attrs.get("noise") == "lognormal"
    fig = Figure(figsize=(11.0, max(3.3 * len(names) + 0.8, 6.0)), layout="constrained")
    grid = fig.add_gridspec(2 * len(names), 2, height_ratios=[3, 1] * len(names),
                            width_ratios=[1.6, 1])  # fmt: skip
    for j, name in enumerate(names):
        top = fig.add_subplot(grid[2 * j, 0])
        bottom = fig.add_subplot(grid[2 * j + 1, 0], sharex=top)
        _draw_observed(dataset, name, coord, top, bottom, log)
        if j == 0:
            top.legend(fontsize=8, loc="best")
    terms = [str(n)[len("learned_") :] for n in dataset.data_vars if str(n).startswith("learned_")]
    right = grid[:, 1].subgridspec(2 + len(terms), 1)
    text_ax = fig.add_subplot(right[0, 0])
    text_ax.axis("off")
    text_ax.set_title("estimates ± standard errors", fontsize=9)
    lines = estimates_text(dataset)
    lines += ["", f"noise: {dataset.attrs.get('noise', '?')}"]
    lines += [f"loss {float(dataset.attrs.get('loss', np.nan)):.4g}, "
              f"dof {dataset.attrs.get('dof', '?')}"]  # fmt: skip
    text_ax.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", family="monospace",
                 fontsize=8.5, transform=text_ax.transAxes)  # fmt: skip
    loss_ax = fig.add_subplot(right[1, 0])
    history = np.asarray(dataset["loss_history"], dtype=float)
    finite = np.isfinite(history) & (history > 0)
    loss_ax.semilogy(np.flatnonzero(finite), history[finite], lw=1.2)
    loss_ax.set_xlabel("optimizer step [1]")
    loss_ax.set_ylabel("loss [1]")
    loss_ax.set_title("loss history", fontsize=9)
    if "curriculum_start_step" in dataset:  # each later stage fits more of the data
        for step, h in zip(dataset["curriculum_start_step"].values[1:],
                           dataset["curriculum_horizon"].values[1:]):  # fmt: skip
            loss_ax.axvline(step, color="0.5", lw=0.8, ls=":")
            loss_ax.text(step, 1.0, f" to {h:g}", transform=loss_ax.get_xaxis_transform(),
                         va="top", fontsize=7, color="0.4")  # fmt: skip
        loss_ax.set_title("loss history (of each curriculum stage's data)", fontsize=9)
    for i, field in enumerate(terms):
        draw_learned(dataset, field, fig.add_subplot(right[2 + i, 0]))
    title = f"{dataset.attrs.get('model', '')} fit ({dataset.attrs.get('optimizer', '')}): "
    return finish_figure(fig, title + str(dataset.attrs.get("status", "")), path)


# A learned term of many outputs (a field) draws this many of them, the first ones.
MAX_OUTPUTS = 4


def draw_learned(dataset: xr.Dataset, field: str, ax) -> None:
    """The learned term `field` (`learned_<field>`): over its input grid (one input), or
    against the time of each visited input (several), beside `reference_<field>`."""
    learned = dataset[f"learned_{field}"]
    reference = dataset.get(f"reference_{field}")
    dim = learned.dims[0]
    scalar = dim == f"{field}_input"
    x = np.asarray(dataset[dim] if scalar else dataset[f"{field}_time"], dtype=float)
    style = "-" if scalar else "."
    outputs = learned.shape[1]
    for k in range(min(outputs, MAX_OUTPUTS)):
        tag = "" if outputs == 1 else f" [{k}]"
        ax.plot(x, np.asarray(learned[:, k]), style, color=f"C{k}", lw=1.5, ms=3,
                label=f"learned{tag}")  # fmt: skip
        if reference is not None:
            ax.plot(x, np.asarray(reference[:, k]), "--" if scalar else "x", color=f"C{k}",
                    lw=1.0, ms=3, alpha=0.8, label=f"reference{tag}")  # fmt: skip
    if scalar:
        grid = dataset[dim]
        name = grid.attrs.get("state_variable", dim)
        ax.set_xlabel(f"{name} [{grid.attrs.get('units', '1')}]")
    else:
        ax.set_xlabel("time of the input")
    ax.set_ylabel(f"{field} [{learned.attrs.get('units', '1')}]")
    title = f"learned {field}"
    if "rms_error_vs_reference" in learned.attrs:
        title += f" (rms error vs reference {learned.attrs['rms_error_vs_reference']:.2g})"
    if outputs > MAX_OUTPUTS:
        title += f", outputs 0-{MAX_OUTPUTS - 1} of {outputs}"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="best")


# A fit to experiments draws this many of them (one colour each), the first ones.
MAX_EXPERIMENTS = 6


def _draw_observed(dataset: xr.Dataset, name: str, coord: str, ax, res_ax, log: bool) -> None:
    data, curve = dataset[name], dataset[f"{name}_curve"]
    x_dense = np.asarray(curve[curve.dims[-1]])
    if data.ndim == 1:
        _draw_series(ax, dataset, name, coord, x_dense, ("C0", "C1"), ("data", "fit"), None)
    else:  # over (experiment, time)
        dim = data.dims[0]
        for i in range(min(data.sizes[dim], MAX_EXPERIMENTS)):
            tag = f"{dim} {dataset[dim].values[i]}"
            _draw_series(ax, dataset, name, coord, x_dense, (f"C{i}", f"C{i}"), (tag, None),
                         {dim: i})  # fmt: skip
    ax.set_ylabel(label(data))
    ax.tick_params(labelbottom=False)
    if log:
        set_log_scale(ax, "y")
    residual = dataset[f"{name}_residual"]
    res_ax.axhline(0.0, color="0.5", lw=0.8)
    rows = np.atleast_2d(np.asarray(residual))[:MAX_EXPERIMENTS]
    for i, row in enumerate(rows):
        res_ax.plot(np.asarray(dataset[coord]), row, "o", color=f"C{i}", ms=3)
    what = "log(data/fit)" if log else "data − fit"
    res_ax.set_ylabel(f"{what} [{residual.attrs.get('units', '1')}]", fontsize=8)
    res_ax.set_xlabel(label(dataset[coord]))
    x = np.asarray(dataset[coord], dtype=float)
    if np.all(x == np.round(x)):  # whole numbers (years, days): no half ticks
        from matplotlib.ticker import MaxNLocator

        res_ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _draw_series(ax, dataset, name, coord, x_dense, colors, labels, where) -> None:
    """One time series: its band, fitted curve and data (`where`: which experiment)."""

    def pick(var):
        return np.asarray(dataset[var] if where is None else dataset[var].isel(where))

    band = "95 % prediction band" if where is None else None
    ax.fill_between(x_dense, pick(f"{name}_lower"), pick(f"{name}_upper"), color=colors[1],
                    alpha=0.2, lw=0, label=band)  # fmt: skip
    ax.plot(x_dense, pick(f"{name}_curve"), "-", color=colors[1], lw=1.5, label=labels[1])
    ax.plot(np.asarray(dataset[coord]), pick(name), "o", color=colors[0], ms=4, label=labels[0])
