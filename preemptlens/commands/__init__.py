"""One module per `preemptlens` subcommand (see preemptlens.cli.COMMANDS)."""
