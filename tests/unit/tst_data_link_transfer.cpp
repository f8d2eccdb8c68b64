// A data link's two ends (wire/data_link.h) in one process, on real loopback
// sockets: tensors larger than the sockets' buffers arrive whole both ways,
// whether the sender waits on its own thread or overlaps on the link's I/O
// thread; a peer that goes mid-transfer, or sends nothing, is reported with
// why, and the link stays failed. The protocol against parasync-node is in
// tests/integration/tst_data_link.cpp.
#include "wire/data_link.h"

#include <QTest>

#include <numeric>
#include <thread>

using namespace parasync;
using namespace std::chrono_literals;

namespace {

// Four tensors of 16 MB in all: far beyond loopback's socket buffers, so
// every transfer waits for the other end many times.
std::vector<std::vector<float>> sentTensors()
{
    std::vector<std::vector<float>> tensors{std::vector<float>(3'000'000), std::vector<float>(7),
                                            std::vector<float>(1'000'000), std::vector<float>(2)};
    float next = 0.5f;
    for (auto &t : tensors)
        for (float &v : t)
            v = (next += 1.25f);
    return tensors;
}

std::vector<std::vector<float>> sameShapes(const std::vector<std::vector<float>> &tensors)
{
    std::vector<std::vector<float>> out;
    for (const auto &t : tensors)
        out.emplace_back(t.size(), -1.0f);
    return out;
}

TensorValues valuesOf(const std::vector<std::vector<float>> &tensors)
{
    TensorValues values;
    for (const auto &t : tensors)
        values.emplace_back(t.data(), t.size());
    return values;
}

TensorDestinations destinationsOf(std::vector<std::vector<float>> &tensors)
{
    TensorDestinations destinations;
    for (auto &t : tensors)
        destinations.emplace_back(t.data(), t.size());
    return destinations;
}

// A worker's end and the ps's end of one link, made as a Train stream makes
// them: a grant, a greeting with its nonce, the ps's claim.
struct LinkPair
{
    explicit LinkPair(std::chrono::milliseconds stall) : acceptor("127.0.0.1", stall)
    {
        const DataLinkGrant grant = acceptor.grant();
        std::string error;
        worker = DataLink::connect(context, "127.0.0.1", grant.port, grant.nonce, 5s, stall, &error);
        if (!worker)
            qFatal("the worker's end did not connect: %s", error.c_str());
        ps = acceptor.claim(grant.nonce, 5s);
        if (!ps)
            qFatal("the ps did not claim the link");
    }

    DataLinkContext context;
    DataLinkAcceptor acceptor;
    std::unique_ptr<DataLink> worker;
    std::unique_ptr<DataLink> ps;
};

} // namespace

class TestDataLinkTransfer : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void tensorsLargerThanTheSocketBuffersArriveWholeBothWays()
    {
        LinkPair link(5s);
        const auto sent = sentTensors();

        // The worker's push, sent on its own thread while the ps reads.
        auto received = sameShapes(sent);
        bool wrote = false;
        std::thread pusher([&] { wrote = link.worker->write(valuesOf(sent)); });
        const bool read = link.ps->read(destinationsOf(received));
        pusher.join();
        QVERIFY2(wrote, link.worker->error().c_str());
        QVERIFY2(read, link.ps->error().c_str());
        QVERIFY(received == sent);

        // The answer, the other way.
        auto answer = sameShapes(sent);
        std::thread answerer([&] { wrote = link.ps->write(valuesOf(sent)); });
        const bool readAnswer = link.worker->read(destinationsOf(answer));
        answerer.join();
        QVERIFY2(wrote, link.ps->error().c_str());
        QVERIFY2(readAnswer, link.worker->error().c_str());
        QVERIFY(answer == sent);

        const uint64_t bytes = 4 * uint64_t(3'000'000 + 7 + 1'000'000 + 2);
        QCOMPARE(link.worker->bytesSent(), bytes);
        QCOMPARE(link.ps->bytesReceived(), bytes);
        QCOMPARE(link.ps->bytesSent(), bytes);
        QCOMPARE(link.worker->bytesReceived(), bytes);
    }

    // startWrite() returns before the ps has read anything: what the socket
    // did not take goes on the I/O thread, and the worker's next read on the
    // link waits for it to have gone.
    void anOverlappedWriteGoesOnWhileTheCallerGoesOn()
    {
        LinkPair link(5s);
        const auto sent = sentTensors();
        QVERIFY2(link.worker->startWrite(valuesOf(sent)), link.worker->error().c_str());

        auto received = sameShapes(sent);
        std::thread ps([&] {
            if (link.ps->read(destinationsOf(received)))
                link.ps->write(valuesOf(received));
        });
        auto answer = sameShapes(sent);
        const bool read = link.worker->read(destinationsOf(answer));
        ps.join();
        QVERIFY2(read, link.worker->error().c_str());
        QVERIFY(received == sent);
        QVERIFY(answer == sent);
    }

    void aPeerThatGoesMidTransferIsReportedAndTheLinkStaysFailed()
    {
        LinkPair link(5s);
        const auto sent = sentTensors();
        auto received = sameShapes(sent);
        // Half of what the ps waits for, then the worker's end closes.
        std::thread worker([&] {
            const std::vector<float> half(2'000'000, 1.0f);
            link.worker->write({std::span<const float>(half)});
            link.worker.reset();
        });
        const bool read = link.ps->read(destinationsOf(received));
        worker.join();
        QVERIFY(!read);
        QVERIFY2(link.ps->error().find("receiving on the data link failed: the other end closed it") == 0,
                 link.ps->error().c_str());
        const std::vector<float> more(4, 1.0f);
        QVERIFY(!link.ps->write({std::span<const float>(more)}));
    }

    void aPeerThatSendsNothingEndsTheReadAfterTheStall()
    {
        LinkPair link(300ms);
        std::vector<float> gradient(1'000);
        QVERIFY(!link.ps->read({std::span<float>(gradient)}));
        QCOMPARE(QString::fromStdString(link.ps->error()),
                 QStringLiteral("receiving on the data link failed: no byte moved for 300 ms"));
        // The ps shut the link down: the worker's end sees it closed.
        QVERIFY(!link.worker->read({std::span<float>(gradient)}));
        QVERIFY2(link.worker->error().find("the other end closed it") != std::string::npos,
                 link.worker->error().c_str());
    }
};

QTEST_GUILESS_MAIN(TestDataLinkTransfer)
#include "tst_data_link_transfer.moc"
