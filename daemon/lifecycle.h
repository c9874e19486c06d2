// hearthd's life from listening to exit: listeners (socket activation or our own socket),
// the HTTP server thread, loading the model, the scheduler, readiness, the signal loop and
// the graceful shutdown (docs in the functions below).
#pragma once

#include <signal.h>

#include "daemon/config.h"

namespace hearth::daemon {

// SIGTERM, SIGINT and SIGHUP: blocked in every thread (main blocks them before creating
// any) and taken synchronously by the lifecycle with sigtimedwait.
sigset_t shutdown_signals();

// Serves until SIGTERM or SIGINT, then shuts down gracefully. cfg.socket must be resolved
// (not empty) unless systemd passes listening sockets. The signals of shutdown_signals()
// must already be blocked. Returns the process exit code: 0 after a clean shutdown, 1 when
// a listener, the model or the scheduler could not be set up.
//
// Shutdown, on the first SIGTERM/SIGINT: STOPPING=1; the server stops accepting (the
// socket file is removed) and new generation requests get 503; requests in flight get
// cfg.shutdown_grace_s seconds to finish (a second SIGTERM/SIGINT ends the wait at once);
// then whatever is left is cancelled (its streams end with finish_reason "cancelled"),
// connections get up to a second to write their last bytes, and the server, the scheduler
// and the model are torn down in that order.
int run_daemon(const DaemonConfig& cfg);

}  // namespace hearth::daemon
