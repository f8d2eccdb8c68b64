#pragma once

// wire's own: what its gRPC clients share (included by core/wire's .cpp
// files only; other folders see call_result.h, ps_client.h and
// cluster_client.h).

#include "proto/parasync.grpc.pb.h"
#include "wire/call_result.h"
#include "wire/ps_client.h"
#include "wire/rpc_settings.h"

#include <grpcpp/grpcpp.h>

#include <memory>

namespace parasync {

// A gRPC status as a CallResult, its description in describeRpcError's words.
CallResult resultOf(const grpc::Status &status);

// Telemetry.Watch on `stub`, with a context of its own.
std::unique_ptr<TelemetryStream> openTelemetryStream(proto::Telemetry::Stub &stub, const RpcSettings &rpc,
                                                     const proto::WatchRequest &request);

} // namespace parasync
