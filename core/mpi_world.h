#pragma once

// This process's place in an MPI job (OpenMPI, launched by `mpirun`): MPI is
// set up once per process, before any MPI communicator is made
// (core/mpi_communicator.h), and ended once, after the last one is destroyed.
// No MPI type appears here; the MPI headers stay in core/'s own files.

#include "core/status.h"

namespace ember {

// This process's place in the job.
struct MpiWorld {
  int rank = 0;
  int size = 1;
  // Whether the environment says mpirun (or another MPI launcher) started
  // this process; only then is MPI initialised.
  bool launched_by_mpirun = false;
};

// Sets MPI up for this process, once; later calls return the same world.
// Launched by mpirun (OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK is set):
// initialises MPI with MPI_THREAD_MULTIPLE, so that communicators can be used
// from several threads at once, and makes MPI errors return codes instead of
// aborting. Otherwise MPI is left alone (no start-up cost) and the world is
// rank 0 of 1. `argc` and `argv` may be null. Fails with FailedPrecondition
// if MPI cannot give MPI_THREAD_MULTIPLE or was finalised already, Internal
// if MPI fails. Thread safety: may be called from any thread.
//
// With `timeout_seconds` > 0 the start-up (MPI_Init_thread and the first
// collective over the world, neither of which MPI bounds) is: a process
// still in it after that long waits for a rank that was lost while the job
// started (mpirun does not always end the others then). It says so on
// stderr and exits with status 3, as a crash, so that the job is restarted.
Result<MpiWorld> InitMpi(int* argc, char*** argv, double timeout_seconds = 0);

// Ends MPI if InitMpi started it; otherwise does nothing. Idempotent. MPI
// waits in MPI_Finalize for every rank to finalise too, so call it on a
// clean exit only, after every MPI communicator is destroyed. A rank that
// fails exits non-zero without it: mpirun then ends the other ranks (and
// names the rank that failed). Messages that communicators had sent but no
// rank received are given up to 10 s to complete first. Fails with Internal
// if MPI fails.
Status FinalizeMpi();

}  // namespace ember
