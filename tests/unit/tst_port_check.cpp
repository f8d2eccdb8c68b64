// The one "is this port free" check (base/port_holder.h) against real
// sockets on loopback: what the launcher, the pre-flight's probe and a task
// that failed to bind all decide by. Free must mean "a task would start
// there": a listener takes a port, a run's TIME_WAIT leftovers do not.
#include "base/port_holder.h"

#include <QFile>
#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

using namespace parasync;

namespace {

// A plain TCP socket on 127.0.0.1, closed when it goes.
class Socket
{
public:
    Socket() : m_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
    ~Socket() { close(); }
    Socket(const Socket &) = delete;
    Socket &operator=(const Socket &) = delete;

    int fd() const { return m_fd; }
    void close()
    {
        if (m_fd >= 0)
            ::close(m_fd);
        m_fd = -1;
    }
    // As gRPC's listener: Linux lets a SO_REUSEADDR bind share a port with
    // TIME_WAIT connections only when they carried the flag too.
    void reuseAddress()
    {
        const int on = 1;
        ::setsockopt(m_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    }
    // Without reuseAddress(), as a program that does not expect TIME_WAIT binds.
    bool bindTo(const char *host, uint16_t port)
    {
        const sockaddr_in address = addressOf(host, port);
        return ::bind(m_fd, reinterpret_cast<const sockaddr *>(&address), sizeof address) == 0;
    }
    bool listenOn(const char *host, uint16_t port) { return bindTo(host, port) && ::listen(m_fd, 4) == 0; }
    uint16_t port() const
    {
        sockaddr_in address{};
        socklen_t length = sizeof address;
        ::getsockname(m_fd, reinterpret_cast<sockaddr *>(&address), &length);
        return ntohs(address.sin_port);
    }
    bool connectTo(uint16_t port)
    {
        const sockaddr_in address = addressOf("127.0.0.1", port);
        return ::connect(m_fd, reinterpret_cast<const sockaddr *>(&address), sizeof address) == 0;
    }
    static sockaddr_in addressOf(const char *host, uint16_t port)
    {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(port);
        ::inet_pton(AF_INET, host, &address.sin_addr);
        return address;
    }

private:
    int m_fd;
};

// Whether /proc/net/tcp shows a connection in TIME_WAIT (state 06) whose
// local port is `port`.
bool timeWaitOn(uint16_t port)
{
    QFile table(QStringLiteral("/proc/net/tcp"));
    if (!table.open(QIODevice::ReadOnly))
        return false;
    const QByteArray localPort = QByteArray::number(port, 16).toUpper().rightJustified(4, '0').prepend(':');
    for (const QByteArray &line : table.readAll().split('\n')) {
        const QList<QByteArray> fields = line.simplified().split(' ');
        if (fields.size() > 3 && fields[1].endsWith(localPort) && fields[3] == "06")
            return true;
    }
    return false;
}

} // namespace

class TestPortCheck : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aListenerTakesThePort_data()
    {
        QTest::addColumn<QString>("listenOn");
        QTest::addColumn<QString>("checked");
        QTest::newRow("same address") << QStringLiteral("127.0.0.1") << QStringLiteral("127.0.0.1");
        QTest::newRow("localhost is 127.0.0.1") << QStringLiteral("127.0.0.1") << QStringLiteral("localhost");
        QTest::newRow("a task on every address") << QStringLiteral("127.0.0.1") << QStringLiteral("0.0.0.0");
        QTest::newRow("under a listener on every address") << QStringLiteral("0.0.0.0") << QStringLiteral("127.0.0.1");
    }
    void aListenerTakesThePort()
    {
        QFETCH(QString, listenOn);
        QFETCH(QString, checked);
        const uint16_t port = pickFreePort();
        QVERIFY(port != 0);
        QVERIFY(isPortFree(checked.toStdString(), port));

        // As a task's gRPC server binds: pickFreePort keeps its port bound
        // (with SO_REUSEADDR) in this process.
        Socket listener;
        listener.reuseAddress();
        QVERIFY(listener.listenOn(listenOn.toLatin1().constData(), port));
        std::string why;
        QVERIFY(!isPortFree(checked.toStdString(), port, &why));
        QCOMPARE(why, std::string("address in use"));
        QVERIFY(bindPort(checked.toStdString(), port).inUse());
        // Whose it is, as the launcher and the probe then say.
        const auto holder = findPortHolder(port);
        QVERIFY(holder);
        QCOMPARE(holder->pid, int64_t(::getpid()));

        listener.close();
        QVERIFY(isPortFree(checked.toStdString(), port));
    }

    // A picked port stays reserved while the process that picked it lives:
    // the kernel gives it to no bind of port 0 (its rule refuses it to a bind
    // without SO_REUSEADDR, as to any bind of port 0), so a test ctest runs
    // beside this one cannot be handed it; a task binds and listens there as
    // on a free port, and once it is gone the port is free again.
    void aPickedPortIsReservedForItsTask()
    {
        const uint16_t port = pickFreePort();
        QVERIFY(port != 0);
        Socket other;
        QVERIFY(!other.bindTo("127.0.0.1", port));
        QCOMPARE(errno, EADDRINUSE);
        QVERIFY(isPortFree("127.0.0.1", port));
        {
            Socket task;
            task.reuseAddress();
            QVERIFY(task.listenOn("127.0.0.1", port));
            QVERIFY(!isPortFree("127.0.0.1", port));
        }
        QVERIFY(isPortFree("127.0.0.1", port));
        QVERIFY(pickFreePort() != port);
    }

    void aPortWithOnlyTimeWaitLeftIsFree()
    {
        // Not from pickFreePort, which keeps its ports bound: here the
        // TIME_WAIT alone is to hold it.
        uint16_t port = 0;
        {
            // A connection that the listening side closes first leaves a
            // TIME_WAIT on the listener's port, as a ps that served a run does.
            Socket listener;
            listener.reuseAddress();
            QVERIFY(listener.listenOn("127.0.0.1", 0));
            port = listener.port();
            Socket client;
            QVERIFY(client.connectTo(port));
            const int accepted = ::accept(listener.fd(), nullptr, nullptr);
            QVERIFY(accepted >= 0);
            ::close(accepted);
            listener.close();
        }
        QTRY_VERIFY_WITH_TIMEOUT(timeWaitOn(port), 5000);
        // What the check is about: a bind without SO_REUSEADDR still fails.
        Socket naive;
        QVERIFY(!naive.bindTo("127.0.0.1", port));
        QCOMPARE(errno, EADDRINUSE);

        std::string why;
        QVERIFY2(isPortFree("127.0.0.1", port, &why), why.c_str());
        QVERIFY(why.empty());
    }

    void aHostNameThatDoesNotResolveSaysSo()
    {
        // .invalid never resolves (RFC 6761).
        std::string why;
        QVERIFY(!isPortFree("no-such-host.invalid", 2222, &why));
        QVERIFY2(why.find("'no-such-host.invalid' does not resolve") != std::string::npos, why.c_str());
        QVERIFY(!bindPort("no-such-host.invalid", 2222).inUse());
    }

    void anAddressOfAnotherHostIsNotInUse()
    {
        // 192.0.2.1 is TEST-NET-1: never this machine's.
        const PortBinding binding = bindPort("192.0.2.1", 2222);
        QVERIFY(!binding.bound());
        QVERIFY(!binding.inUse());
        QVERIFY2(binding.why().find("not an address of this host") != std::string::npos, binding.why().c_str());
    }

    void aHeldPortIsTakenUntilReleased()
    {
        const uint16_t port = pickFreePort();
        QVERIFY(port != 0);
        std::optional<PortBinding> held = bindPort("127.0.0.1", port, true);
        QVERIFY2(held->bound(), held->why().c_str());
        // Listening: a connection is accepted by the kernel.
        Socket client;
        QVERIFY(client.connectTo(port));
        QVERIFY(!isPortFree("127.0.0.1", port));

        PortBinding moved = std::move(*held);
        held.reset();
        QVERIFY(!isPortFree("127.0.0.1", port));
        moved = PortBinding();
        QVERIFY(isPortFree("127.0.0.1", port));
    }

    void ipv6LoopbackIsCheckedAsIpv6()
    {
        const int probe = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in6 loopback{};
        loopback.sin6_family = AF_INET6;
        loopback.sin6_addr = in6addr_loopback;
        const bool ipv6 = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr *>(&loopback), sizeof loopback) == 0
                          && ::listen(probe, 4) == 0;
        if (!ipv6) {
            if (probe >= 0)
                ::close(probe);
            QSKIP("no IPv6 loopback here");
        }
        socklen_t length = sizeof loopback;
        ::getsockname(probe, reinterpret_cast<sockaddr *>(&loopback), &length);
        const uint16_t port = ntohs(loopback.sin6_port);
        QVERIFY(!isPortFree("::1", port));
        QVERIFY(!isPortFree("[::1]", port));
        ::close(probe);
        QVERIFY(isPortFree("[::1]", port));
    }
};

QTEST_GUILESS_MAIN(TestPortCheck)
#include "tst_port_check.moc"
