// The Prometheus text format (0.0.4) and OpenMetrics 1.0.0 as
// formats/open_metrics.h writes them: what a scraper parses, down to the
// escapes, the counters' suffixes, the end marker and the negotiation.
#include "formats/open_metrics.h"

#include <QTest>

#include <cmath>
#include <limits>
#include <stdexcept>

using namespace parasync;

namespace {

std::vector<MetricFamily> sampleFamilies()
{
    MetricFamily steps;
    steps.name = "parasync_worker_steps";
    steps.type = MetricType::Counter;
    steps.help = "Steps the worker finished";
    steps.add(12, {{"worker", "0"}}).add(7, {{"worker", "1"}});
    MetricFamily step;
    step.name = "parasync_global_step";
    step.help = "The global step";
    step.add(19);
    MetricFamily mode;
    mode.name = "parasync_mode";
    mode.type = MetricType::Info;
    mode.help = "The update mode";
    mode.add(1, {{"mode", "sync"}});
    return {steps, step, mode};
}

} // namespace

class TestOpenMetrics : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void prometheusTextNamesCountersByTheirSamples()
    {
        const std::string text = renderMetrics(sampleFamilies(), ExpositionFormat::PrometheusText);
        QCOMPARE(QString::fromStdString(text),
                 QStringLiteral("# HELP parasync_worker_steps_total Steps the worker finished\n"
                                "# TYPE parasync_worker_steps_total counter\n"
                                "parasync_worker_steps_total{worker=\"0\"} 12\n"
                                "parasync_worker_steps_total{worker=\"1\"} 7\n"
                                "# HELP parasync_global_step The global step\n"
                                "# TYPE parasync_global_step gauge\n"
                                "parasync_global_step 19\n"
                                "# HELP parasync_mode_info The update mode\n"
                                "# TYPE parasync_mode_info gauge\n"
                                "parasync_mode_info{mode=\"sync\"} 1\n"));
    }

    void openMetricsNamesFamiliesWithoutSuffixesAndEndsWithEof()
    {
        const std::string text = renderMetrics(sampleFamilies(), ExpositionFormat::OpenMetrics);
        QCOMPARE(QString::fromStdString(text), QStringLiteral("# HELP parasync_worker_steps Steps the worker finished\n"
                                                              "# TYPE parasync_worker_steps counter\n"
                                                              "parasync_worker_steps_total{worker=\"0\"} 12\n"
                                                              "parasync_worker_steps_total{worker=\"1\"} 7\n"
                                                              "# HELP parasync_global_step The global step\n"
                                                              "# TYPE parasync_global_step gauge\n"
                                                              "parasync_global_step 19\n"
                                                              "# HELP parasync_mode The update mode\n"
                                                              "# TYPE parasync_mode info\n"
                                                              "parasync_mode_info{mode=\"sync\"} 1\n"
                                                              "# EOF\n"));
        QCOMPARE(renderMetrics({}, ExpositionFormat::OpenMetrics), std::string("# EOF\n"));
        QCOMPARE(renderMetrics({}, ExpositionFormat::PrometheusText), std::string());
    }

    void labelValuesAndHelpAreEscapedAsTheSpecSays()
    {
        QCOMPARE(escapeLabelValue("a\\b\"c\nd"), std::string("a\\\\b\\\"c\\nd"));
        QCOMPARE(escapeLabelValue("heldout_accuracy"), std::string("heldout_accuracy"));
        // The 0.0.4 text leaves a help text's double quotes alone; OpenMetrics escapes them.
        QCOMPARE(escapeHelp("say \"x\"\\n\nnext", ExpositionFormat::PrometheusText),
                 std::string("say \"x\"\\\\n\\nnext"));
        QCOMPARE(escapeHelp("say \"x\"", ExpositionFormat::OpenMetrics), std::string("say \\\"x\\\""));

        MetricFamily f;
        f.name = "parasync_chief_metric";
        f.add(0.5, {{"metric", "odd \"name\"\n"}});
        QCOMPARE(renderMetrics({f}, ExpositionFormat::PrometheusText),
                 std::string("# TYPE parasync_chief_metric gauge\nparasync_chief_metric{metric=\"odd "
                             "\\\"name\\\"\\n\"} 0.5\n"));
    }

    void valuesReadBackExactly_data()
    {
        QTest::addColumn<double>("value");
        QTest::addColumn<QString>("text");
        QTest::newRow("integer") << 12.0 << QStringLiteral("12");
        QTest::newRow("negative integer") << -3.0 << QStringLiteral("-3");
        QTest::newRow("zero") << 0.0 << QStringLiteral("0");
        QTest::newRow("fraction") << 0.1 << QStringLiteral("0.1");
        QTest::newRow("a float widened") << double(0.123f) << QStringLiteral("0.12300000339746475");
        QTest::newRow("huge") << 1e100 << QStringLiteral("1e+100");
        QTest::newRow("2^53") << 9007199254740992.0 << QStringLiteral("9007199254740992");
        QTest::newRow("NaN") << std::nan("") << QStringLiteral("NaN");
        QTest::newRow("+Inf") << std::numeric_limits<double>::infinity() << QStringLiteral("+Inf");
        QTest::newRow("-Inf") << -std::numeric_limits<double>::infinity() << QStringLiteral("-Inf");
    }
    void valuesReadBackExactly()
    {
        QFETCH(double, value);
        QFETCH(QString, text);
        QCOMPARE(QString::fromStdString(formatMetricValue(value)), text);
        if (!std::isnan(value))
            QCOMPARE(std::stod(formatMetricValue(value) == "+Inf" ? "inf" : formatMetricValue(value)), value);
    }

    void floatFiguresAreShownAsTheFloatIs()
    {
        QCOMPARE(formatMetricValue(metricValueOf(0.1f)), std::string("0.1"));
        QCOMPARE(formatMetricValue(metricValueOf(0.34546912f)), std::string("0.34546912"));
        QCOMPARE(formatMetricValue(metricValueOf(3.0f)), std::string("3"));
        QVERIFY(std::isnan(metricValueOf(std::nanf(""))));
        QCOMPARE(formatMetricValue(metricValueOf(-std::numeric_limits<float>::infinity())), std::string("-Inf"));
    }

    void namesAreChecked()
    {
        QVERIFY(isValidMetricName("parasync_global_step"));
        QVERIFY(isValidMetricName("job:rate5m"));
        QVERIFY(!isValidMetricName("2fast"));
        QVERIFY(!isValidMetricName("held-out"));
        QVERIFY(!isValidMetricName(""));
        QVERIFY(isValidLabelName("worker"));
        QVERIFY(!isValidLabelName("__name__"));
        QVERIFY(!isValidLabelName("a:b"));
        QVERIFY(!isValidLabelName("9"));
    }

    // What a scraper would refuse (and drop the whole scrape for) is refused
    // when rendering, with what is wrong.
    void whatAScraperWouldRefuseIsRefused_data()
    {
        QTest::addColumn<int>("problem");
        QTest::newRow("counter named _total") << 0;
        QTest::newRow("bad metric name") << 1;
        QTest::newRow("reserved label") << 2;
        QTest::newRow("two families of one name") << 3;
        QTest::newRow("two samples with the same labels") << 4;
        QTest::newRow("info sample not 1") << 5;
        QTest::newRow("a gauge named as a counter's sample") << 6;
        QTest::newRow("a label given twice") << 7;
    }
    void whatAScraperWouldRefuseIsRefused()
    {
        QFETCH(int, problem);
        MetricFamily a;
        a.name = "parasync_x";
        a.add(1);
        std::vector<MetricFamily> families{a};
        switch (problem) {
        case 0:
            families[0].name = "parasync_x_total";
            families[0].type = MetricType::Counter;
            break;
        case 1: families[0].name = "parasync-x"; break;
        case 2: families[0].samples[0].labels = {{"__worker", "1"}}; break;
        case 3: families.push_back(a); break;
        case 4: families[0].add(2); break;
        case 5:
            families[0].type = MetricType::Info;
            families[0].samples[0].value = 2;
            break;
        case 6: {
            families[0].type = MetricType::Counter;
            MetricFamily gauge;
            gauge.name = "parasync_x_total";
            gauge.add(3);
            families.push_back(gauge);
            break;
        }
        case 7: families[0].samples[0].labels = {{"worker", "1"}, {"worker", "2"}}; break;
        }
        for (const auto format : {ExpositionFormat::PrometheusText, ExpositionFormat::OpenMetrics})
            QVERIFY_THROWS_EXCEPTION(std::invalid_argument, renderMetrics(families, format));
    }

    void theScrapersAcceptHeaderChoosesTheFormat_data()
    {
        QTest::addColumn<QString>("accept");
        QTest::addColumn<bool>("openMetrics");
        // Prometheus 2.42's own header.
        QTest::newRow("prometheus") << QStringLiteral("application/openmetrics-text;version=1.0.0,application/"
                                                      "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;"
                                                      "q=0.5,*/*;q=0.1")
                                    << true;
        QTest::newRow("none (curl)") << QString() << false;
        QTest::newRow("anything") << QStringLiteral("*/*") << false;
        QTest::newRow("text only") << QStringLiteral("text/plain;version=0.0.4") << false;
        QTest::newRow("openmetrics, no version") << QStringLiteral("application/openmetrics-text") << true;
        QTest::newRow("openmetrics, spaces and case")
            << QStringLiteral("Application/OpenMetrics-Text; Version=1.0.0; q=0.9, text/plain; q=0.5") << true;
        QTest::newRow("text preferred") << QStringLiteral("application/openmetrics-text;q=0.3,text/plain;q=0.9")
                                        << false;
        QTest::newRow("openmetrics refused") << QStringLiteral("application/openmetrics-text;q=0") << false;
        QTest::newRow("unknown version") << QStringLiteral("application/openmetrics-text;version=2.0.0") << false;
        QTest::newRow("garbage") << QStringLiteral(";;,=,q=,application/openmetrics-text;q=x") << false;
    }
    void theScrapersAcceptHeaderChoosesTheFormat()
    {
        QFETCH(QString, accept);
        QFETCH(bool, openMetrics);
        const ExpositionFormat format = negotiateExposition(accept.toStdString());
        QCOMPARE(format == ExpositionFormat::OpenMetrics, openMetrics);
        QCOMPARE(QString::fromLatin1(metricsContentType(format)).section(QLatin1Char(';'), 0, 0),
                 openMetrics ? QStringLiteral("application/openmetrics-text") : QStringLiteral("text/plain"));
    }
};

QTEST_GUILESS_MAIN(TestOpenMetrics)
#include "tst_open_metrics.moc"
