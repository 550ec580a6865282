"""The ``tvm-latmodel`` command: :mod:`.main` wires the subcommand modules
together (``tvm_latmodel.cli.main:main`` is the entry point). Nothing else
in the package imports the CLI."""
