# Sourced by every script: what mpirun needs on a small box run as root.
# Oversubscription lets the tests start more ranks than cores; root needs explicit consent.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Idle ranks must yield the core to busy ones when oversubscribed.
export OMPI_MCA_mpi_yield_when_idle=1
