"""Grid dependency control (programmatic dependent launch, sm_90+): `gdc_wait` and
`gdc_launch_dependents`.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.griddepcontrol import definition, lowering  # noqa: F401
