"""The application: running an experiment config end to end, the `difsim` command line, multi-host
start-up.
"""

from difsim._app._cli import (
    console_main as console_main,
    main as main,
)
from difsim._app._run import (
    run_config as run_config,
)
