package pullmodel

// CompactMetadata is compactMetadata, for the external tests.
var CompactMetadata = compactMetadata

// SetIndexBuckets sets the buckets of the indexes whose values name one object each, until the
// test ends.
func SetIndexBuckets(t interface{ Cleanup(func()) }, n uint32) {
	before := indexBuckets
	indexBuckets = n
	t.Cleanup(func() { indexBuckets = before })
}

// BucketOf is bucketOf, for the external tests.
var BucketOf = bucketOf

// MadeFromApp is madeFromApp, for the external tests.
var MadeFromApp = madeFromApp
