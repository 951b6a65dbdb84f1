"""Experiment configs: TOML parsing, the schema and its checks, and the objects each section
builds.
"""

from difsim._config._fit_network import (
    label_terms as label_terms,
    network_references as network_references,
)
from difsim._config._load import (
    ConfigError as ConfigError,
    Experiment as Experiment,
    load_config as load_config,
    parse_override as parse_override,
)
from difsim._config._solver import (
    check_atol_against_state as check_atol_against_state,
    declared_state as declared_state,
)
