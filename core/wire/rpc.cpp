#include "wire/rpc.h"

#include <grpc/support/log.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace parasync {

namespace {

// gRPC's own log, routed through one place. Its INFO and DEBUG lines are
// internals; its errors reach the user, prefixed so they read as gRPC's.
// Lines it writes while a process shuts its channels down are dropped:
// they report gRPC's own teardown order, not a fault (gRPC 1.51's backup
// poller says "run_poller: UNKNOWN:Timer list shutdown" when the process
// exits while a channel is polled), and read as failures at the end of a
// run that went well.
void routeGrpcLog(gpr_log_func_args *args)
{
    if (args->severity != GPR_LOG_SEVERITY_ERROR)
        return;
    for (const char *teardown : {"Timer list shutdown", "backup_poller"}) {
        if (std::strstr(args->message, teardown) || (args->file && std::strstr(args->file, teardown)))
            return;
    }
    const char *file = args->file ? std::strrchr(args->file, '/') : nullptr;
    std::fprintf(stderr, "gRPC error: %s (%s:%d)\n", args->message, file ? file + 1 : args->file, args->line);
}

} // namespace

void prepareGrpcProcess()
{
    // GRPC_VERBOSITY=debug|info in the environment still shows everything,
    // for whoever debugs gRPC itself.
    if (!std::getenv("GRPC_VERBOSITY") && !std::getenv("GRPC_TRACE"))
        gpr_set_log_function(routeGrpcLog);
    // gRPC's synchronous API moves a client channel's bytes only on threads
    // that are inside a call (or serve one), plus a backup poller every 5 s.
    // A process with no server of its own and no call in progress -- the
    // benchmarks saw it; the app between control calls could -- then answers
    // its keepalive pings late, the ping times out after --heartbeat_ms and
    // gRPC closes a healthy connection. Poll often enough for the heartbeat.
    // (A value already in the environment wins.)
    ::setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "100", 0);
}

RpcSettings rpcSettingsFor(const ConnectionOptions &options, bool serving)
{
    RpcSettings settings;
    settings.maxMessageBytes = options.maxMessageBytes;
    settings.heartbeatMs = options.heartbeatMs;
    settings.tls = loadTlsMaterial(options, serving);
    return settings;
}

namespace {

std::shared_ptr<grpc::ChannelCredentials> channelCredentials(const TlsMaterial &tls)
{
    if (!tls.enabled())
        return grpc::InsecureChannelCredentials();
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = tls.caPem;
    // Presented when the server asks (mutual TLS); harmless otherwise.
    options.pem_private_key = tls.keyPem;
    options.pem_cert_chain = tls.certPem;
    return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::ServerCredentials> serverCredentials(const TlsMaterial &tls)
{
    if (!tls.enabled())
        return grpc::InsecureServerCredentials();
    grpc::SslServerCredentialsOptions options(tls.mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                         : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    options.pem_root_certs = tls.caPem;
    options.pem_key_cert_pairs.push_back({tls.keyPem, tls.certPem});
    return grpc::SslServerCredentials(options);
}

} // namespace

std::shared_ptr<grpc::Channel> makeChannel(const std::string &address, const RpcSettings &settings)
{
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(settings.maxMessageBytes);
    args.SetMaxSendMessageSize(settings.maxMessageBytes);
    // Reconnect quickly when a restarted task comes back; Backoff paces our
    // own retries and logging.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Each task gets its own channel: gRPC would otherwise share one TCP
    // connection between channels to the same address.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, settings.heartbeatMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, settings.heartbeatMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    return grpc::CreateCustomChannel(address, channelCredentials(settings.tls), args);
}

std::unique_ptr<grpc::ClientContext> makeContext(const RpcSettings &settings, std::chrono::milliseconds deadline)
{
    auto context = std::make_unique<grpc::ClientContext>();
    if (!settings.clusterToken.empty())
        context->AddMetadata(kTokenMetadataKey, settings.clusterToken);
    if (deadline.count() > 0)
        context->set_deadline(std::chrono::system_clock::now() + deadline);
    return context;
}

grpc::Status callRidingOutDrops(const RpcSettings &settings, std::chrono::milliseconds budget,
                                const std::function<grpc::Status(grpc::ClientContext *)> &call)
{
    const auto until = std::chrono::system_clock::now() + budget;
    auto context = makeContext(settings);
    context->set_deadline(until);
    const grpc::Status first = call(context.get());
    const auto says = [&first](const char *part) { return first.error_message().find(part) != std::string::npos; };
    // Nothing listening, or a certificate refused: no second try would differ.
    if (first.error_code() != grpc::StatusCode::UNAVAILABLE || says("onnection refused") || says("ertificate")
        || says("CERTIFICATE"))
        return first;
    grpc::Status last = first;
    while (last.error_code() == grpc::StatusCode::UNAVAILABLE && std::chrono::system_clock::now() < until) {
        context = makeContext(settings);
        context->set_deadline(until);
        context->set_wait_for_ready(true);
        last = call(context.get());
    }
    return last.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? first : last;
}

void configureServer(grpc::ServerBuilder &builder, const std::string &address, const RpcSettings &settings,
                     int *selectedPort)
{
    builder.AddListeningPort(address, serverCredentials(settings.tls), selectedPort);
    builder.SetMaxReceiveMessageSize(settings.maxMessageBytes);
    builder.SetMaxSendMessageSize(settings.maxMessageBytes);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // Ping idle workers too, so a training stream whose peer vanished without
    // a FIN (cut link) breaks within about two heartbeats.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, settings.heartbeatMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, settings.heartbeatMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // Accept the clients' pings at that rate instead of answering GOAWAY.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, settings.heartbeatMs / 2);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

bool isTlsFailure(const grpc::Status &status)
{
    const std::string &message = status.error_message();
    const auto says = [&message](const char *part) { return message.find(part) != std::string::npos; };
    return says("andshake") || says("SSL") || says("ssl") || says("certificate");
}

std::string describeRpcError(const grpc::Status &status)
{
    std::string message = status.error_message();
    const auto says = [&message](const char *part) { return message.find(part) != std::string::npos; };
    // A TLS failure also reads "failed to connect": tell it apart first.
    if (isTlsFailure(status)) {
        if (says("CERTIFICATE_VERIFY_FAILED") || says("certificate verify failed"))
            return "TLS handshake refused: the peer's certificate is not signed by --tls_ca (or does not name this "
                   "address)";
        return "TLS handshake failed (" + message
               + "): do both sides use TLS with the same CA, and does the server ask for a client certificate "
                 "(--tls_mutual) this side lacks?";
    }
    switch (status.error_code()) {
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
        return "message too large (" + message + "): raise --max_message_bytes on every task";
    case grpc::StatusCode::UNAVAILABLE:
        if (says("onnection refused"))
            return "connection refused (is the task running and listening there?)";
        // A plaintext client at a TLS server (or any other protocol) sees the
        // connection closed during the HTTP/2 set-up.
        if (says("Socket closed") || says("onnection reset") || says("End of TCP stream"))
            return "the connection was closed while setting it up: does the task use TLS (then give --tls_ca), "
                   "is another program on that port, or is this machine too loaded to answer the task's "
                   "keepalive pings in time (--heartbeat_ms)? ("
                   + message + ")";
        // HTTP/2 pings unanswered: the TCP connection was made, so the
        // process is there, but it does not run (see the seeds' pitfalls).
        if (says("keepalive watchdog timeout"))
            return "the task accepted the connection but does not answer: stopped (SIGSTOP, a debugger), "
                   "overloaded or swapping? ("
                   + message + ")";
        if (says("failed to connect"))
            return "cannot connect (" + message + ")";
        return "unavailable (" + message + ")";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "timed out (a firewall, a wrong host, or the task is overloaded)";
    case grpc::StatusCode::UNAUTHENTICATED: return "refused: wrong or missing cluster token";
    default: return message.empty() ? "error " + std::to_string(int(status.error_code())) : message;
    }
}

} // namespace parasync
