#pragma once

// A separate "host" for tests: a Linux network namespace joined to this one
// by a veth pair, so tasks in it have their own address, routes and link
// that a test can cut. Needs root (CAP_NET_ADMIN) and iproute2; create()
// says why not otherwise. The destructor ends every process left in the
// namespace and removes it and its link, whatever happened in the test.

#include <QString>
#include <QStringList>

namespace parasync::testing {

class NetNamespace
{
public:
    // Subnet 10.231.<subnet>.0/24: this side .1, the namespace .2.
    explicit NetNamespace(int subnet);
    ~NetNamespace();
    NetNamespace(const NetNamespace &) = delete;
    NetNamespace &operator=(const NetNamespace &) = delete;

    bool create(QString *whyNot);
    const QString &name() const { return m_name; }
    QString address() const;     // inside: 10.231.<subnet>.2
    QString hostAddress() const; // this side: 10.231.<subnet>.1
    // Cuts (false) or restores (true) the link, as an unplugged cable would.
    bool setLinkUp(bool up);
    // Adds a route inside the namespace (e.g. "default via 10.231.1.1").
    bool addRoute(const QString &route);
    // Adds another address to this side of the link (one the namespace has
    // no route to, unless it is given one).
    bool addHostAddress(const QString &cidr);

    static bool run(const QStringList &args, QString *output = nullptr);

private:
    // Removes this subnet's namespace left by a test process that is gone.
    void removeLeftovers();
    void destroy();
    int m_subnet;
    QString m_name;
    QString m_hostLink; // this side of the veth pair
    QString m_nsLink;
    bool m_created = false;
};

} // namespace parasync::testing
