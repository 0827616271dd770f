package handover

import "time"

// failSafe bounds every wait of a test on an event; it is a deadline for a
// broken test, never the way a test waits for something.
const failSafe = 20 * time.Second
