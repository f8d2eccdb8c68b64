#include "ui/windows/window_logging.h"

namespace parasync::ui {

// Debug off, warnings on, as for the rest of the app's categories.
Q_LOGGING_CATEGORY(lcUi, "parasync.ui", QtInfoMsg)

} // namespace parasync::ui
