// The raw TCP floor and the round-trip timing (round_trip.h).

#include "round_trip.h"

#include "wire/rpc.h"

#include <QFile>
#include <QThread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace parasync::bench {

namespace {

void setNoDelay(int fd)
{
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool readFully(int fd, char *data, size_t size)
{
    while (size > 0) {
        const ssize_t n = ::recv(fd, data, size, 0);
        if (n <= 0)
            return false;
        data += n;
        size -= size_t(n);
    }
    return true;
}

bool writeFully(int fd, const char *data, size_t size)
{
    while (size > 0) {
        const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        data += n;
        size -= size_t(n);
    }
    return true;
}

} // namespace

int serveTcp(uint16_t port)
{
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 || ::listen(listener, 4) != 0) {
        std::perror("bench tcp server");
        return 1;
    }
    std::printf("tcp echo listening on %u\n", unsigned(port));
    std::fflush(stdout);
    std::vector<char> in, out;
    for (;;) {
        const int fd = ::accept(listener, nullptr, nullptr);
        if (fd < 0)
            return 1;
        setNoDelay(fd);
        uint32_t header[2];
        while (readFully(fd, reinterpret_cast<char *>(header), sizeof header)) {
            in.resize(header[0]);
            out.resize(header[1]);
            if (!readFully(fd, in.data(), in.size()) || !writeFully(fd, out.data(), out.size()))
                break;
        }
        ::close(fd);
    }
}

TcpClient::TcpClient(uint16_t port)
{
    m_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int attempt = 0; attempt < 200; ++attempt) {
        if (::connect(m_fd, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0) {
            setNoDelay(m_fd);
            return;
        }
        QThread::msleep(10);
    }
    throw std::runtime_error("cannot connect to the tcp echo server");
}

TcpClient::~TcpClient()
{
    ::close(m_fd);
}

bool TcpClient::pingPong(size_t request, size_t reply)
{
    m_out.resize(sizeof(uint32_t) * 2 + request);
    const uint32_t header[2] = {uint32_t(request), uint32_t(reply)};
    std::memcpy(m_out.data(), header, sizeof header);
    m_in.resize(reply);
    return writeFully(m_fd, m_out.data(), m_out.size()) && readFully(m_fd, m_in.data(), m_in.size());
}

ProcessUse processUse(qint64 pid)
{
    QFile stat(pid > 0 ? QStringLiteral("/proc/%1/stat").arg(pid) : QStringLiteral("/proc/self/stat"));
    if (!stat.open(QIODevice::ReadOnly))
        return {};
    // Fields after the command name (which may hold spaces) start at state (3).
    const QByteArray text = stat.readAll();
    const QList<QByteArray> fields = text.mid(text.lastIndexOf(')') + 2).split(' ');
    if (fields.size() < 13)
        return {};
    const double ticks = fields[11].toDouble() + fields[12].toDouble();          // utime, stime
    return {ticks * 1e6 / double(::sysconf(_SC_CLK_TCK)), fields[7].toDouble()}; // minflt
}

ChiefStream::ChiefStream(const std::string &address, const proto::InitializeRequest &init, bool dataLink)
    : m_channel(makeChannel(address, RpcSettings{}))
{
    auto initContext = makeContext(RpcSettings{}, std::chrono::seconds(30));
    proto::InitializeResponse initialized;
    const auto status = proto::ParameterService::NewStub(m_channel)->Initialize(initContext.get(), init, &initialized);
    if (!status.ok())
        throw std::runtime_error("cannot initialise the ps: " + describeRpcError(status));

    m_context = makeContext(RpcSettings{});
    m_stream = std::make_unique<TrainCall>(*m_channel, *m_context);
    proto::TrainRequest join;
    join.mutable_join()->set_worker_index(0);
    join.mutable_join()->set_pid(::getpid());
    *join.mutable_join()->mutable_signature() = init.signature();
    join.mutable_join()->set_offers_data_link(dataLink);
    join.mutable_join()->set_offers_messages_on_data_link(dataLink);
    proto::TrainResponse joined;
    if (!m_stream->write(join) || !m_stream->read(&joined) || !joined.join().ready())
        throw std::runtime_error("the ps did not accept the join");
    m_joinedAtStep = joined.join().global_step();
    if (joined.join().has_data_link()) {
        std::string error;
        if (!m_stream->openDataLink(m_links, "127.0.0.1", joined.join().data_link(), std::chrono::seconds(5),
                                    std::chrono::seconds(5), &error))
            throw std::runtime_error("cannot open the data link: " + error);
    }
}

ChiefStream::~ChiefStream()
{
    proto::TrainRequest leave;
    leave.mutable_leave()->set_finished(false);
    m_stream->write(leave);
    m_stream->writesDone();
    m_stream->finish();
}

} // namespace parasync::bench
