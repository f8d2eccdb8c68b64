#pragma once

#include "base/backoff.h"
#include "wire/rpc_settings.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace parasync {

// Process-wide gRPC settings; call first thing in main(), before any channel
// or server exists (gRPC reads them once, when it starts). Also routes
// gRPC's log: its errors to stderr, its internals and teardown noise nowhere.
void prepareGrpcProcess();

inline constexpr const char *kTokenMetadataKey = "parasync-cluster-token";

std::shared_ptr<grpc::Channel> makeChannel(const std::string &address, const RpcSettings &settings);

// A client context carrying the cluster token, with an optional deadline.
std::unique_ptr<grpc::ClientContext> makeContext(const RpcSettings &settings, std::chrono::milliseconds deadline = {});

// Makes one call that is safe to repeat, riding out connections that break
// within `budget`. The first attempt fails fast, so a task that is not there
// ("connection refused") or a refused certificate is reported at once. Any other UNAVAILABLE (a loaded
// task closing a connection whose client did not answer its keepalive ping in
// time: "Socket closed", "Broken pipe") is tried again on a fresh context
// with wait_for_ready until the budget is spent: gRPC reconnects with its
// backoff and sends the call once a connection stands. Out of time, the first
// failure is returned; it says more than "deadline exceeded".
grpc::Status callRidingOutDrops(const RpcSettings &settings, std::chrono::milliseconds budget,
                                const std::function<grpc::Status(grpc::ClientContext *)> &call);

// Configures a server builder: listening port, message limits, and no
// SO_REUSEPORT (gRPC's default would let a second process silently share a
// task's port; a second task on a taken port must fail to start instead).
void configureServer(grpc::ServerBuilder &builder, const std::string &address, const RpcSettings &settings,
                     int *selectedPort);

// A gRPC failure in words a user can act on.
std::string describeRpcError(const grpc::Status &status);
// Whether a failed call failed in the TLS handshake: the user's certificate
// files (a wrong --tls_ca, a missing client certificate), not the peer's
// absence.
bool isTlsFailure(const grpc::Status &status);

} // namespace parasync
