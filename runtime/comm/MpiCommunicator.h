//===- MpiCommunicator.h - Communicators over MPI ---------------*- C++ -*-===//
//
// The CPU communicator: ranks are processes started by `mpirun`. MPI starts
// only when the first MPI communicator is created, so cleave commands that
// never communicate never touch it, and it is finalized at process exit. MPI
// errors are set to return (MPI_ERRORS_RETURN) and come back as a Status
// carrying MPI's own error string, never as an abort.
//
// This header does not include mpi.h: users link CleaveComm and need nothing
// else from MPI.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Communicator.h"

namespace cleave::runtime {

/// Starts MPI once per process (MPI_Init_thread asking for
/// MPI_THREAD_MULTIPLE) and finalizes it at exit. Idempotent and thread-safe.
/// If the host program already started MPI, that is used and left for it to
/// finalize.
Status initMpi();

/// A new communicator over every rank of the job, named "world"; a process
/// run without mpirun is a world of one. Each call duplicates
/// MPI_COMM_WORLD, so independent users never receive each other's messages.
Status createMpiWorld(std::unique_ptr<Communicator> *world);

} // namespace cleave::runtime
