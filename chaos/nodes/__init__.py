"""Nodes: where the system under test and the workers run. ``local`` (the
default: processes on this machine) or ``docker`` (containers of a local or
remote Docker daemon, ``chaos.nodes.docker``)."""
