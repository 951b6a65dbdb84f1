"""The base of difsim's adaptive controllers that wrap another one."""

import diffrax as dfx
import equinox as eqx


class AbstractWrappedController(dfx.AbstractAdaptiveStepSizeController):
    """An adaptive step-size controller around `controller`, whose tolerances and norm are
    its own: implicit solvers read them for their stage solves, events for their root
    finds. Final subclasses hold `controller` and decide the steps."""

    controller: eqx.AbstractVar[dfx.AbstractAdaptiveStepSizeController]

    @property
    def rtol(self):
        return self.controller.rtol

    @property
    def atol(self):
        return self.controller.atol

    @property
    def norm(self):
        return self.controller.norm
