// Package e2enodes is the end-to-end test on real nodes (test/fleet's Options.RealNodes): what
// the project ships to a cluster runs as pods from images built on this machine. It runs with
// FLEET_REAL_NODES=1, as root, with hack/node-packages.sh's packages (`make test-node`).
package e2enodes
