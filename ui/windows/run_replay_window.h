#pragma once

// A finished run, replayed from its run directory into the same charts as a
// live one, in a window of its own so that a live cluster keeps its view.

#include "ui/models/run_loader.h"

#include <QMainWindow>

namespace parasync::ui {

class RunChartsView;

class RunReplayWindow : public QMainWindow
{
    Q_OBJECT

public:
    explicit RunReplayWindow(const LoadedRun &run, QWidget *parent = nullptr);
    RunChartsView *charts() const { return m_charts; }

private:
    void exportAllInteractive();

    LoadedRun m_run;
    RunChartsView *m_charts;
};

} // namespace parasync::ui
