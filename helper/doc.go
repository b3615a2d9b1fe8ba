// Package helper holds small leaf utilities shared across Berth: IDs,
// backoff, pointers. It imports only the standard library.
package helper
