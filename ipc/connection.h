// One client connection: a coroutine that reads requests (with header, body and idle
// deadlines and size limits), answers them through the route table (route_table.h), and runs generation
// requests — streamed as SSE or answered whole — while watching for the client to leave.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "ipc/state.h"

namespace hearth::ipc {

// Spawns the connection's coroutine on the socket's executor (a strand of its own).
// check_host: a loopback-only TCP listener (non-loopback Host headers get 403).
// state must outlive the io_context the socket belongs to.
template <class Protocol>
void start_connection(ServerState& state, typename Protocol::socket socket, bool check_host);

extern template void start_connection<boost::asio::ip::tcp>(ServerState&, boost::asio::ip::tcp::socket, bool);
extern template void start_connection<boost::asio::local::stream_protocol>(ServerState&,
                                                                           boost::asio::local::stream_protocol::socket,
                                                                           bool);

}  // namespace hearth::ipc
