/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

// Package pki is the small, dependency-free certificate toolkit behind the hub PKI of
// argocd-agent: the agent CA, the principal and resource-proxy server certificates, the
// agents' mTLS client certificates (issued by the CSR signer and for the Argo CD cluster
// secret), the JWT signing key, and the helpers that decide when any of them must be rotated.
//
// Every function takes the current time as an argument instead of reading the clock, so
// reconcilers stay deterministic and tests can move through a certificate's lifetime.
// Keys are always generated with crypto/rand; nothing here touches the network or a cluster.
package pki
