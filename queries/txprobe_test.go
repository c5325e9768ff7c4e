package queries

import "testing"

func TestTxProbe(t *testing.T) {
	savepoint, release := TxProbe()
	if savepoint != "SAVEPOINT outboxgen_tx_probe" || release != "RELEASE SAVEPOINT outboxgen_tx_probe" {
		t.Errorf("TxProbe() = %q, %q: want the savepoint and its release, of one name", savepoint, release)
	}
}
