"""usage"""
