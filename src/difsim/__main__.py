"""`python -m difsim`: the same as the `difsim` command."""

from difsim._app import console_main

console_main()
